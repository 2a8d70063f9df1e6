"""Tests that need a TPU: they run where libtpu is installed (`pytest -m tpu`, one
process: one program holds the chip at a time) and skip elsewhere, so CI on a CPU skips
them cleanly. What they check is the CPU tier's contract on the chip; the parity table on
the chip is made by benchmarks/parity_precision.py (docs/testing.md)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from _runs import UPDATES, small_config

pytestmark = [
    pytest.mark.tpu,
    pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                       reason="needs a TPU (libtpu is not installed)"),
]


def test_small_run_trains_on_the_chip_with_the_cpu_schedule(tmp_path):
    """The shared small run, its two seeds vmapped on the TPU: the same gate and update
    counts as on a CPU (tests/_runs.py works them out by hand), finite evaluations and
    losses, its checkpoint written."""
    import jax

    from dreamerjax.run import driver

    assert jax.default_backend() == "tpu"
    result = driver.train(small_config(), (0, 1), str(tmp_path / "run"), progress=False)
    got = [(r["seed"], r["rows"], r["updates"]) for r in result.records]
    assert got == [(s, rows, UPDATES[rows]) for rows in (80, 160, 240) for s in (0, 1)]
    for r in result.records:
        assert np.isfinite(r["eval_mean"])
    assert np.isfinite(result.records[-1]["train"]["opt_grad_norm"])
