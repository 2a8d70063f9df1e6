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
