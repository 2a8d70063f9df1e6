"""The parity rows of each fixture file of tests/data/reference, computed once per test
process and per file: the tests that read a file's rows share them, and a failing file is
named by its own test."""

from __future__ import annotations

import functools
from pathlib import Path

from dreamerjax.tools.parity import fixtures
from dreamerjax.tools.parity.agent_checks import data_devices_of

REF = Path(__file__).parent / "data" / "reference"
# Data-parallel fixtures (`*dpN*`) need N devices: tests/test_parity_data_parallel.py checks
# them in a child with host devices, as `dreamerjax parity` does.
FILES = tuple(sorted(p.name for p in REF.iterdir()
                     if p.is_file() and data_devices_of(p.name) == 1))
AE = ("twohot.npz", "symlog_symexp.npz", "retnorm.npz", "lambda_returns.npz", "optimizer.npz")


@functools.cache
def rows(name: str) -> tuple[fixtures.Row, ...]:
    """The rows `dreamerjax parity` gives for REF / name."""
    return tuple(fixtures.check_file(REF / name)[0])
