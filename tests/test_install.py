"""What the package says about installing when run from this checkout (an installed wheel
is checked by .ci/wheel_smoke.sh: no `-e`, parity asks for the fixture directory)."""

from pathlib import Path

import pytest

from dreamerjax.envs import registry
from dreamerjax.tools import cli

ROOT = Path(__file__).resolve().parents[1]


def test_install_hints_name_the_extra_and_the_checkout_form():
    assert registry.checkout_root() == ROOT
    assert registry.install_command("craftax") == (
        "pip install 'dreamerjax[craftax]' (in this checkout: pip install -e '.[craftax]')")


def test_parity_defaults_to_the_checkouts_fixtures_and_says_where_they_are(tmp_path):
    args = cli.parse(["parity"]).validate()
    assert args.directory == ROOT / "tests" / "data" / "reference"
    with pytest.raises(cli.ArgumentError, match="tests/data/reference of a dreamerjax source "
                                                "checkout"):
        cli.parse(["parity", str(tmp_path / "missing")]).validate()


# JAX's public names the package uses that recent releases added: name -> the first
# release that has it (read from the released wheels: jax/memory.py is new in 0.7.1, the
# public unregister_event_duration_listener in jax/monitoring.py in 0.8.1).
JAX_ADDED = {"jax.memory.": "0.7.1",
             "jax.monitoring.unregister_event_duration_listener": "0.8.1",
             "jax.shard_map(": "0.6.2"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_jax_floor_has_every_name_the_package_uses():
    """pyproject's `jax>=` floor is no older than the newest JAX name the code calls (the
    quick tier passes at that floor); a name from a newer release raises the floor."""
    import re
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = next(re.fullmatch(r"jax>=([\d.]+)", d.split("#")[0].strip()).group(1)
                 for d in deps if d.startswith("jax>="))
    source = "\n".join(p.read_text() for p in (ROOT / "dreamerjax").rglob("*.py"))
    used = {name: added for name, added in JAX_ADDED.items() if name in source}
    assert "jax.memory." in used  # the table is of names the code has
    for name, added in used.items():
        assert _version(floor) >= _version(added), f"{name} is new in jax {added}"
