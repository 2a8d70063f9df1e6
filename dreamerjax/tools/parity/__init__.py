"""Parity with the reference implementation, measured on its own fixtures.

`run_parity(directory)` checks every fixture file it has a check for and reports the rest;
`main_parity` is the body of `dreamerjax parity DIR [--strict]`.
"""

from __future__ import annotations

import sys

from dreamerjax.tools.parity import fixtures
from dreamerjax.tools.parity.fixtures import (
    Row,
    compare,
    register,
    register_companion,
    register_unsupported,
    run_parity,
)

try:  # agent-level checks (fixtures f-h) register themselves when that module exists
    from dreamerjax.tools.parity import agent_checks  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "dreamerjax.tools.parity.agent_checks":
        raise


try:  # checks of the reference's HEAD (e3f0224) fixtures
    from dreamerjax.tools.parity import head_checks  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "dreamerjax.tools.parity.head_checks":
        raise


from dreamerjax.tools.parity import option_checks  # noqa: E402,F401  (training options)

FIXTURES = "tests/data/reference"  # in a source checkout


def default_fixtures():
    """The checkout's fixture directory when run from a checkout, else None."""
    from dreamerjax.envs.registry import checkout_root

    root = checkout_root()
    found = None if root is None else root / FIXTURES
    return found if found is not None and found.is_dir() else None


def fixtures_hint() -> str:
    """Where the fixtures are: they are arrays the reference produced (about 30 MB), kept
    in the source repository, not in the installed package."""
    return (f"the reference's fixtures are not in the installed package; they are "
            f"{FIXTURES} of a dreamerjax source checkout (dreamerjax parity "
            f"CHECKOUT/{FIXTURES})")


def host_devices_flags(directory: str, env: dict) -> str | None:
    """XLA_FLAGS with as many host (CPU) devices as the directory's data-parallel fixtures
    (`*dpN*` files) ran on, to be set before JAX starts its backend; None when XLA_FLAGS
    already sets a host device count or no fixture needs more than one device. The
    command line applies it, so `dreamerjax parity` checks them on any machine."""
    from pathlib import Path

    from dreamerjax.tools.parity.agent_checks import data_devices_of

    path = Path(directory)
    names = [p.name for p in path.iterdir()] if path.is_dir() else []
    need = max((data_devices_of(n) for n in names), default=1)
    current = env.get("XLA_FLAGS", "")
    if need <= 1 or "xla_force_host_platform_device_count" in current:
        return None
    return f"{current} --xla_force_host_platform_device_count={need}".strip()


def main_parity(directory: str, strict: bool = False) -> int:
    """Print the parity table for `directory` and return the process exit code.

    0: every check passed; 1: a check failed (or, with strict, a fixture is unknown or
    not yet supported); 2: the directory does not exist.
    """
    try:
        _, code = run_parity(directory, strict=strict)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return code


__all__ = [
    "FIXTURES", "Row", "compare", "default_fixtures", "fixtures", "fixtures_hint",
    "host_devices_flags",
    "main_parity", "register", "register_companion",
    "register_unsupported", "run_parity",
]
