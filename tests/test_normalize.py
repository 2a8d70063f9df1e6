"""Percentile return normaliser (dreamerjax.algo.normalize)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.algo import normalize
from dreamerjax.config.defaults import RetNormConfig
from dreamerjax.tools.parity import fixtures

REF = Path(__file__).parent / "data" / "reference"


def test_update_by_hand():
    cfg = RetNormConfig()
    x = jnp.arange(101, dtype=jnp.float32)  # percentiles 5 and 95 are exactly 5 and 95
    state = normalize.retnorm_update(normalize.retnorm_init(), x, cfg)
    np.testing.assert_allclose(state.low, 0.05, rtol=1e-6)
    np.testing.assert_allclose(state.high, 0.95, rtol=1e-6)
    state = normalize.retnorm_update(state, x, cfg)
    np.testing.assert_allclose(state.low, 0.99 * 0.05 + 0.05, rtol=1e-6)


def test_scale_never_below_limit():
    cfg = RetNormConfig(limit=1.0)
    state = normalize.RetNormState(low=jnp.float32(2.0), high=jnp.float32(2.3))
    offset, scale = normalize.retnorm_stats(state, cfg)
    assert float(offset) == 2.0 and float(scale) == 1.0
    state = normalize.RetNormState(low=jnp.float32(-1.0), high=jnp.float32(3.0))
    assert float(normalize.retnorm_stats(state, cfg)[1]) == 4.0


def test_stats_carry_no_gradient():
    cfg = RetNormConfig()

    def f(x):
        state = normalize.retnorm_update(normalize.retnorm_init(), x, cfg)
        offset, scale = normalize.retnorm_stats(state, cfg)
        return offset + scale

    g = jax.grad(f)(jnp.linspace(-100.0, 100.0, 50))
    assert np.all(np.asarray(g) == 0.0)


def test_state_is_a_pytree_for_vmap():
    cfg = RetNormConfig()
    states = jax.vmap(lambda _: normalize.retnorm_init())(jnp.arange(3))
    xs = jnp.stack([jnp.zeros(20), jnp.ones(20) * 100, jnp.arange(20.0)])
    out = jax.vmap(lambda s, x: normalize.retnorm_update(s, x, cfg))(states, xs)
    np.testing.assert_allclose(out.high, [0.0, 1.0, 0.01 * np.percentile(np.arange(20.0), 95)],
                               rtol=1e-6)


def test_retnorm_fixture_matches_reference():
    rows = list(fixtures.check_retnorm(REF / "retnorm.npz"))
    assert len(rows) == 6
    bad = [r for r in rows if not r.passed]
    assert not bad, bad
