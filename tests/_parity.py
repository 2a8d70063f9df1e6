"""The parity rows of each fixture file of tests/data/reference, computed once per test
process and per file: the agent-level files (f-j) each compile their own programs, so the
tests that read them are parametrized by file and spread over the test workers."""

from __future__ import annotations

import functools
from pathlib import Path

from dreamerjax.tools.parity import fixtures

REF = Path(__file__).parent / "data" / "reference"
FILES = tuple(sorted(p.name for p in REF.iterdir() if p.is_file()))
AE = ("twohot.npz", "symlog_symexp.npz", "retnorm.npz", "lambda_returns.npz", "optimizer.npz")


def group(name: str) -> str:
    """The test worker group (pytest-xdist's loadgroup) of the tests reading `name`."""
    return "parity-ae" if name in AE else f"parity-{name}"


@functools.cache
def rows(name: str) -> tuple[fixtures.Row, ...]:
    """The rows `dreamerjax parity` gives for REF / name."""
    return tuple(fixtures.check_file(REF / name)[0])
