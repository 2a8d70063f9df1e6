"""benchmarks/scan_unroll.py: the unroll it sets reaches the algorithm's scans and no
other, and unrolling leaves the numbers as they are."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.algo import returns

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "scan_unroll.py"
_spec = importlib.util.spec_from_file_location("scan_unroll", _PATH)
scan_unroll = importlib.util.module_from_spec(_spec)
sys.modules["scan_unroll"] = scan_unroll
_spec.loader.exec_module(scan_unroll)


def _unrolls(fn, *args) -> list:
    jaxpr = jax.make_jaxpr(fn)(*args)
    return [e.params["unroll"] for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]


def _outside(x):
    return jax.lax.scan(lambda c, v: (c + v, c), 0.0, x)[1]


def test_only_the_algorithms_scans_are_unrolled():
    interm, mult = jnp.ones((3, 8)), jnp.full((3, 8), 0.5)
    last = jnp.zeros(3)
    with scan_unroll.algo_scans_unrolled(4):
        assert _unrolls(returns._reverse_recursion, interm, mult, last) == [4]
        assert _unrolls(_outside, jnp.ones(8)) == [1]
    jax.clear_caches()  # JAX keeps traces by function: the benchmark clears them per point
    assert _unrolls(returns._reverse_recursion, interm, mult, last) == [1]


def test_unrolled_scan_gives_the_same_numbers():
    rng = np.random.default_rng(0)
    interm = jnp.asarray(rng.normal(size=(4, 16)), jnp.float32)
    mult = jnp.asarray(rng.uniform(size=(4, 16)), jnp.float32)
    last = jnp.asarray(rng.normal(size=4), jnp.float32)
    rolled = jax.jit(returns._reverse_recursion)(interm, mult, last)
    with scan_unroll.algo_scans_unrolled(16):
        unrolled = jax.jit(returns._reverse_recursion)(interm, mult, last)
    np.testing.assert_array_equal(np.asarray(rolled), np.asarray(unrolled))
