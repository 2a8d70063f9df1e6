"""benchmarks/reference_run/gymnax_ports.py: the numpy float32 Pendulum-v1 the reference
harness trains on equals gymnax's (environments/classic_control/pendulum.py).

Only the physics module is imported (it has no embodied import), so this runs in our venv.
"""

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _benchmarks import load

ports = load("reference_run/gymnax_ports.py")

ENV, PARAMS = gymnax.make("Pendulum-v1")
State = type(ENV.reset_env(jax.random.PRNGKey(0), PARAMS)[1])


@pytest.fixture(scope="module")
def gymnax_step():
    """gymnax's step_env and is_truncated over a batch of states, jitted once."""
    def step(theta, theta_dot, time, action):
        state = State(theta=theta, theta_dot=theta_dot, last_u=jnp.float32(0), time=time)
        obs, new, reward, terminated, _ = ENV.step_env(
            jax.random.PRNGKey(0), state, action, PARAMS)
        return obs, new.theta, new.theta_dot, reward, terminated, ENV.is_truncated(
            new, PARAMS)
    return jax.jit(jax.vmap(step))


def _port_step(theta, theta_dot, time, action):
    port = ports.Pendulum()
    port.set_state(theta, theta_dot, time)
    obs, reward, terminated, truncated = port.step(action)
    return obs, port.theta, port.theta_dot, reward, terminated, truncated


def test_constants_are_gymnax_defaults():
    p = ports.Pendulum
    assert (p.max_speed, p.max_torque, p.dt, p.g, p.m, p.length) == (
        PARAMS.max_speed, PARAMS.max_torque, PARAMS.dt, PARAMS.g, PARAMS.m, PARAMS.l)
    assert p.limit == PARAMS.max_steps_in_episode == 200
    space = ENV.action_space(PARAMS)
    assert (p.action_low, p.action_high, p.action_shape) == (space.low, space.high,
                                                            space.shape)
    np.testing.assert_array_equal(p.obs_high, ENV.observation_space(PARAMS).high)


def test_steps_equal_gymnax_on_random_states(gymnax_step):
    """Angles beyond one turn, speeds at and past the clip, torques past the clip."""
    rng = np.random.default_rng(0)
    n = 2000
    theta = rng.uniform(-3 * np.pi, 3 * np.pi, n).astype(np.float32)
    theta_dot = rng.uniform(-9, 9, n).astype(np.float32)
    time = rng.integers(0, 200, n).astype(np.int32)
    action = rng.uniform(-3, 3, (n, 1)).astype(np.float32)
    want = [np.asarray(x) for x in gymnax_step(theta, theta_dot, time, action)]
    for i in range(n):
        obs, th, thdot, reward, terminated, truncated = _port_step(
            theta[i], theta_dot[i], time[i], action[i])
        assert obs.dtype == np.float32 and obs.shape == (3,)
        assert isinstance(reward, np.float32)
        np.testing.assert_allclose(obs, want[0][i], rtol=0, atol=1e-5)
        np.testing.assert_allclose([th, thdot], [want[1][i], want[2][i]], rtol=0, atol=1e-5)
        np.testing.assert_allclose(reward, want[3][i], rtol=1e-6, atol=1e-5)
        assert not terminated and not want[4][i]
        assert truncated == bool(want[5][i]) == (time[i] + 1 >= 200)


def test_rollout_truncates_at_200_steps():
    """Two episodes with one action sequence: gymnax and the port stay together (each
    step also checked from gymnax's own state), the 200th step is the first truncated
    one, nothing terminates, and reset draws are in gymnax's ranges."""
    step = jax.jit(lambda s, a: ENV.step_env(jax.random.PRNGKey(0), s, a, PARAMS))
    rng = np.random.default_rng(1)
    port = ports.Pendulum()
    for _ in range(2):
        obs = port.reset(rng)
        assert -np.pi <= port.theta <= np.pi and -1 <= port.theta_dot <= 1
        assert port.time == 0
        np.testing.assert_allclose(obs, [np.cos(port.theta), np.sin(port.theta),
                                         port.theta_dot], atol=1e-6)
        state = State(theta=jnp.float32(port.theta), theta_dot=jnp.float32(port.theta_dot),
                      last_u=jnp.float32(0), time=0)
        for t in range(1, 201):
            action = rng.uniform(-2, 2, (1,)).astype(np.float32)
            want_obs, state, want_reward, terminated, _ = step(state, action)
            obs, reward, port_terminated, truncated = port.step(action)
            np.testing.assert_allclose(obs, want_obs, rtol=0, atol=1e-5)
            np.testing.assert_allclose(reward, want_reward, rtol=0, atol=1e-5)
            assert not port_terminated and not bool(terminated)
            assert truncated == bool(ENV.is_truncated(state, PARAMS)) == (t == 200)
            # Re-sync on gymnax's state so per-step error cannot compound.
            port.set_state(np.float32(state.theta), np.float32(state.theta_dot), port.time)
        assert port.time == 200


def test_reset_distribution_is_gymnax_range():
    rng = np.random.default_rng(2)
    port = ports.Pendulum()
    draws = []
    for _ in range(4000):
        obs = port.reset(rng)
        assert obs.dtype == np.float32 and port.time == 0
        draws.append((port.theta, port.theta_dot))
    draws = np.array(draws, np.float64)
    assert np.abs(draws[:, 0]).max() <= np.float32(np.pi)
    assert np.abs(draws[:, 1]).max() <= 1
    # Uniform: each quarter of each range holds about a quarter of the draws.
    for col, high in ((0, np.pi), (1, 1.0)):
        counts = np.histogram(draws[:, col], bins=4, range=(-high, high))[0]
        assert np.all(np.abs(counts - 1000) < 120), counts
