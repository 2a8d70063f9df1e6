"""MuJoCo Playground's DM Control Suite on MJX: action repeat, NaN physics as a
termination, the 1,000-control-step time limit as is_last only, actions mapped to the
actuators' ctrlrange (real playground; skipped without the extra)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("mujoco_playground")

from dreamerjax import envs  # noqa: E402

ENV = "playground_CartpoleBalance"


@pytest.fixture(scope="module")
def cartpole():
    spec = envs.make_env(ENV, dict_obs=True)
    init = jax.jit(lambda k: envs.collector_init(spec, k))
    step = jax.jit(lambda s, a, k: envs.collector_step(spec, s, a, k))
    return spec, init, step


def _with_data(state, **fields):
    suite_state, sums = state.env_state
    data = suite_state.data.replace(**fields)
    return state.replace(env_state=(suite_state.replace(data=data), sums))


def test_spec(cartpole):
    spec, _, _ = cartpole
    assert spec.obs_space == (("vector", (5,), "float32"),)
    assert not spec.discrete and spec.action_dims == 1
    assert spec.episode_limit == 500  # 1,000 control steps at repeat 2
    assert "log_reward_upright" in dict(spec.episode_keys)
    ctrl = spec.env.mj_model.actuator_ctrlrange
    assert spec.action_low == tuple(ctrl[:, 0]) and spec.action_high == tuple(ctrl[:, 1])


def test_collector_state_has_no_zero_size_arrays(cartpole):
    """MJX's Data has zero-size fields (no activations: `act`); orbax cannot checkpoint
    them, so the collector keeps the state without them and rebuilds them to step."""
    spec, init, step = cartpole
    assert any(x.size == 0 for x in jax.tree.leaves(envs.core._state_template(spec)))
    state, _ = init(jax.random.PRNGKey(0))
    state, _, _ = step(state, jnp.array([0.1]), jax.random.PRNGKey(1))
    assert all(x.size > 0 for x in jax.tree.leaves(state))


def test_repeat_applies_the_mapped_action_twice(cartpole):
    spec, init, step = cartpole
    key = jax.random.PRNGKey(0)
    state, row = init(key)
    assert bool(row["is_first"]) and row["obs"]["vector"].dtype == jnp.float32
    new, row, end = step(state, jnp.array([0.5]), key)
    data = new.env_state[0].data
    np.testing.assert_allclose(np.asarray(data.ctrl), [0.5], atol=1e-6)
    assert float(data.time) == pytest.approx(2 * spec.env.dt)  # two control steps
    # The reward is the sum of the two control steps' rewards, each in [0, 1].
    assert 1.0 < float(row["reward"]) <= 2.0 and not bool(row["is_last"])
    assert float(end.stats["log_reward_upright"]) > 0
    clipped, _, _ = step(state, jnp.array([7.0]), key)
    np.testing.assert_allclose(np.asarray(clipped.env_state[0].data.ctrl), spec.action_high)
    back = envs.from_env_action(spec, envs.to_env_action(spec, jnp.array([-0.3])))
    np.testing.assert_allclose(back, [-0.3], atol=1e-6)


def test_forced_termination_nan_physics(cartpole):
    spec, init, step = cartpole
    key = jax.random.PRNGKey(1)
    state, _ = init(key)
    state = _with_data(state, qvel=jnp.full_like(state.env_state[0].data.qvel, jnp.nan))
    state, row, end = step(state, jnp.array([0.0]), key)
    assert bool(row["is_last"]) and bool(row["is_terminal"]) and bool(end.terminal)
    _, row2, _ = step(state, jnp.array([0.0]), key)  # held: the reset row
    assert bool(row2["is_first"]) and np.isfinite(row2["obs"]["vector"]).all()


def test_forced_time_limit(cartpole):
    spec, init, step = cartpole
    key = jax.random.PRNGKey(2)
    state, _ = init(key)
    _, row, _ = step(state.replace(length=jnp.int32(spec.episode_limit - 2)),
                     jnp.array([0.0]), key)
    assert not bool(row["is_last"])
    _, row, end = step(state.replace(length=jnp.int32(spec.episode_limit - 1)),
                       jnp.array([0.0]), key)
    assert bool(row["is_last"]) and not bool(row["is_terminal"])
    assert bool(end.ended) and int(end.length) == spec.episode_limit and not bool(end.terminal)


def test_unknown_task():
    with pytest.raises(ValueError, match="unknown playground env 'Cartpole'.*CartpoleBalance"):
        envs.make_env("playground_Cartpole")
