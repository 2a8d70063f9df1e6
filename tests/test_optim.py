"""The reference optimiser chain (dreamerjax.algo.optim): warmup, AGC, moments, slow critic."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dreamerjax.algo import optim
from dreamerjax.config.defaults import OptConfig
from dreamerjax.tools.parity import fixtures

REF = Path(__file__).parent / "data" / "reference"


@pytest.mark.parametrize("count,factor", [(0, 0.0), (1, 0.001), (999, 0.999), (1000, 1.0),
                                          (5000, 1.0)])
def test_warmup_factor(count, factor):
    out = optim.warmup_factor(jnp.int32(count), 1000)
    np.testing.assert_allclose(out, factor, rtol=1e-7)


def test_warmup_zero_means_no_warmup():
    assert float(optim.warmup_factor(jnp.int32(0), 0)) == 1.0


def _params():
    return {"enc": {"kernel": jnp.full((3, 4), 0.5), "bias": jnp.zeros(4)},
            "head": {"scale": jnp.ones(5)}}


def _grads(scale=1.0):
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    return {"enc": {"kernel": scale * jax.random.normal(keys[0], (3, 4)),
                    "bias": scale * jax.random.normal(keys[1], (4,))},
            "head": {"scale": scale * jax.random.normal(keys[2], (5,))}}


def test_first_update_is_zero_with_warmup_and_counts_advance():
    opt = optim.make_optimizer(OptConfig())
    params = _params()
    state = opt.init(params)
    updates, state = opt.update(_grads(), state, params)
    assert all(np.all(np.asarray(u) == 0.0) for u in jax.tree.leaves(updates))
    nu, mu, rms_count, mom_count = optim.opt_moments(state)
    assert int(rms_count) == int(mom_count) == int(optim.opt_step(state)) == 1
    # The moments move even though the applied update is zero.
    assert float(optim.global_norm(nu)) > 0 and float(optim.global_norm(mu)) > 0
    updates, state = opt.update(_grads(), state, params)
    assert float(optim.global_norm(updates)) > 0


def test_nested_params_first_step_by_hand():
    """W=0, one step: AGC -> nu = 0.001 g^2 -> u = g / |g| -> mu = 0.1 u -> -lr * sign(g)."""
    cfg = OptConfig(warmup=0, agc=1e9)  # AGC inactive: every update is far below the limit
    opt = optim.make_optimizer(cfg)
    params = _params()
    grads = _grads()
    state = opt.init(params)
    updates, state = jax.jit(opt.update)(grads, state, params)
    nu, mu, _, _ = optim.opt_moments(state)
    for g, n, m, u in zip(jax.tree.leaves(grads), jax.tree.leaves(nu), jax.tree.leaves(mu),
                          jax.tree.leaves(updates), strict=True):
        g = np.asarray(g, np.float64)
        np.testing.assert_allclose(n, 0.001 * g * g, rtol=1e-5)
        np.testing.assert_allclose(m, 0.1 * np.sign(g), rtol=1e-5)
        np.testing.assert_allclose(u, -4e-5 * np.sign(g), rtol=1e-5)
    assert jax.tree.structure(updates) == jax.tree.structure(params)


def test_agc_limits_update_norm_per_tensor():
    agc = optim.scale_by_agc(0.3, 1e-3)
    params = {"big": jnp.full((4,), 2.0), "zero": jnp.zeros((3,))}
    grads = {"big": jnp.full((4,), 100.0), "zero": jnp.full((3,), 1.0)}
    out, _ = agc.update(grads, agc.init(params), params)
    # ||param|| = 4 -> limit 1.2; zero param -> limit 0.3 * pmin.
    np.testing.assert_allclose(np.linalg.norm(out["big"]), 1.2, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out["zero"]), 0.3e-3, rtol=1e-6)
    small = {"big": jnp.full((4,), 0.1), "zero": jnp.zeros((3,))}
    out, _ = agc.update(small, agc.init(params), params)
    np.testing.assert_array_equal(out["big"], small["big"])


def test_optimizer_metrics():
    params = _params()
    grads = _grads(2.0)
    updates = jax.tree.map(lambda g: -0.1 * g, grads)
    new = optax.apply_updates(params, updates)
    m = optim.optimizer_metrics(grads, updates, new, jnp.int32(7))
    flat = np.concatenate([np.ravel(x) for x in jax.tree.leaves(grads)])
    np.testing.assert_allclose(m["opt_grad_norm"], np.linalg.norm(flat), rtol=1e-6)
    np.testing.assert_allclose(m["opt_update_norm"], 0.1 * np.linalg.norm(flat), rtol=1e-6)
    newflat = np.concatenate([np.ravel(x) for x in jax.tree.leaves(new)])
    np.testing.assert_allclose(m["opt_param_norm"], np.linalg.norm(newflat), rtol=1e-6)
    assert int(m["opt_grad_steps"]) == 7 and int(m["opt_param_count"]) == 12 + 4 + 5


def test_slow_update_copies_then_mixes():
    critic = {"w": jnp.array([1.0, 2.0])}
    slow = {"w": jnp.array([10.0, -10.0])}
    new, count = optim.slow_update(slow, critic, jnp.int32(0), 0.02, 1)
    np.testing.assert_array_equal(new["w"], critic["w"])
    assert int(count) == 1
    new, count = optim.slow_update(slow, critic, jnp.int32(1), 0.02, 1)
    np.testing.assert_allclose(new["w"], 0.02 * np.array([1.0, 2.0]) + 0.98 * np.array(
        [10.0, -10.0]), rtol=1e-6)
    assert int(count) == 2
    # period 2: odd counts leave the slow params alone.
    new, _ = optim.slow_update(slow, critic, jnp.int32(3), 0.02, 2)
    np.testing.assert_array_equal(new["w"], slow["w"])


def test_optimizer_fixture_matches_reference():
    rows = list(fixtures.check_optimizer(REF / "optimizer.npz"))
    assert len(rows) == 2 * (4 + 4)
    bad = [r for r in rows if not r.passed]
    assert not bad, bad
