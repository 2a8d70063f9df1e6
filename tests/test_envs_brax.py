"""Brax suite: Brax's `done` as a termination (the ant's healthy height), our time limit
as is_last only, actions mapped to ctrl_range (real brax; skipped without the extra)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from dreamerjax import envs  # noqa: E402

ENV = "brax_ant"


@pytest.fixture(scope="module")
def ant():
    spec = envs.make_env(ENV, dict_obs=True)
    init = jax.jit(lambda k: envs.collector_init(spec, k))
    step = jax.jit(lambda s, a, k: envs.collector_step(spec, s, a, k))
    return spec, init, step


def _with_q(state, q):
    suite_state, sums = state.env_state
    pipe = suite_state.pipeline_state.replace(q=q)
    return state.replace(env_state=(suite_state.replace(pipeline_state=pipe), sums))


def test_spec(ant):
    spec, _, _ = ant
    assert spec.obs_space == (("vector", (27,), "float32"),)
    assert not spec.discrete and spec.action_dims == 8 and spec.episode_limit == 1000
    ctrl = np.asarray(spec.env.sys.actuator.ctrl_range)
    assert spec.action_low == tuple(ctrl[:, 0]) and spec.action_high == tuple(ctrl[:, 1])
    a = jnp.linspace(-1, 1, 8)
    np.testing.assert_allclose(envs.from_env_action(spec, envs.to_env_action(spec, a)), a,
                               atol=1e-6)


def test_forced_termination_unhealthy(ant):
    spec, init, step = ant
    key = jax.random.PRNGKey(0)
    state, row = init(key)
    assert bool(row["is_first"])
    healthy, row, _ = step(state, jnp.zeros(8), key)
    assert not bool(row["is_last"]) and float(row["reward"]) != 0.0
    q = state.env_state[0].pipeline_state.q
    high = _with_q(state, q.at[2].set(5.0))  # torso above healthy_z_range (0.2, 1.0)
    state, row, end = step(high, jnp.zeros(8), key)
    assert bool(row["is_last"]) and bool(row["is_terminal"]) and bool(end.terminal)
    assert int(end.length) == 1 and "log_reward_survive" in end.stats
    _, row2, _ = step(state, jnp.zeros(8), key)
    assert bool(row2["is_first"]) and float(row2["reward"]) == 0.0


def test_forced_time_limit(ant):
    spec, init, step = ant
    key = jax.random.PRNGKey(1)
    state, _ = init(key)
    _, row, end = step(state.replace(length=jnp.int32(spec.episode_limit - 1)),
                       jnp.zeros(8), key)
    assert bool(row["is_last"]) and not bool(row["is_terminal"]) and not bool(end.terminal)
    assert int(end.length) == spec.episode_limit


def test_unknown_task_and_backend():
    with pytest.raises(ValueError, match="unknown brax env 'Ant'.*halfcheetah"):
        envs.make_env("brax_Ant")
    with pytest.raises(ValueError, match="brax backend 'fast'"):
        envs.make_env("brax_ant", backend="fast")
