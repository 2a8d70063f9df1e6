"""benchmarks/reference_run/gymnax_ports.py: the numpy float32 CartPole-v1 the reference
harness trains on (the side-by-side whole-run bench) equals gymnax's
(environments/classic_control/cartpole.py).

Only the physics module is imported (it has no embodied import), so this runs in our venv.
"""

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _benchmarks import load

ports = load("reference_run/gymnax_ports.py")

ENV, PARAMS = gymnax.make("CartPole-v1")
State = type(ENV.reset_env(jax.random.PRNGKey(0), PARAMS)[1])


def _state(s, time):
    return State(x=s[0], x_dot=s[1], theta=s[2], theta_dot=s[3], time=time)


@pytest.fixture(scope="module")
def gymnax_step():
    """gymnax's step_env and is_truncated over a batch of states, jitted once."""
    def step(s, time, action):
        obs, new, reward, terminated, _ = ENV.step_env(
            jax.random.PRNGKey(0), _state(s, time), action, PARAMS)
        return obs, reward, terminated, ENV.is_truncated(new, PARAMS)
    return jax.jit(jax.vmap(step))


def test_constants_are_gymnax_defaults():
    p = ports.CartPole
    assert (p.gravity, p.masspole, p.total_mass, p.length, p.polemass_length, p.force_mag,
            p.tau) == tuple(np.float32(x) for x in (
                PARAMS.gravity, PARAMS.masspole, PARAMS.total_mass, PARAMS.length,
                PARAMS.polemass_length, PARAMS.force_mag, PARAMS.tau))
    assert p.theta_threshold == np.float32(PARAMS.theta_threshold_radians)
    assert p.x_threshold == np.float32(PARAMS.x_threshold)
    assert p.limit == PARAMS.max_steps_in_episode == 500
    assert p.num_actions == ENV.action_space(PARAMS).n == 2
    np.testing.assert_array_equal(p.obs_high, ENV.observation_space(PARAMS).high)


def test_steps_equal_gymnax_on_random_states(gymnax_step):
    """States inside and past the termination bounds (so the pre-step terminal reward 0
    and the termination flag are both exercised), both actions, times near the limit."""
    rng = np.random.default_rng(0)
    n = 2000
    s = rng.uniform([-3, -3, -0.3, -3], [3, 3, 0.3, 3], (n, 4)).astype(np.float32)
    time = rng.integers(480, 500, n).astype(np.int32)
    action = rng.integers(0, 2, n).astype(np.int32)
    want = [np.asarray(x) for x in gymnax_step(s, time, action)]
    assert 0 < want[2].sum() < n and 0 < (want[1] == 0).sum() < n  # both branches hit
    for i in range(n):
        port = ports.CartPole()
        port.set_state(s[i], time[i])
        obs, reward, terminated, truncated = port.step(action[i])
        assert obs.dtype == np.float32 and obs.shape == (4,)
        assert isinstance(reward, np.float32)
        np.testing.assert_allclose(obs, want[0][i], rtol=1e-6, atol=1e-6)
        assert reward == want[1][i]
        assert terminated == bool(want[2][i])
        assert truncated == bool(want[3][i]) == (time[i] + 1 >= 500)


def test_rollout_matches_gymnax_until_it_terminates():
    """Episodes with one action sequence: gymnax and the port stay together (re-synced on
    gymnax's state each step so error cannot compound), reward 1 on every step taken,
    and the episode ends on the same step."""
    step = jax.jit(lambda st, a: ENV.step_env(jax.random.PRNGKey(0), st, a, PARAMS))
    rng = np.random.default_rng(1)
    port = ports.CartPole()
    lengths = []
    for _ in range(5):
        obs = port.reset(rng)
        assert np.all(np.abs(obs) <= 0.05) and port.time == 0
        state = _state(jnp.asarray(port.s), 0)
        for _ in range(500):
            action = int(rng.integers(0, 2))
            want_obs, state, want_reward, want_term, _ = step(state, action)
            obs, reward, terminated, truncated = port.step(action)
            np.testing.assert_allclose(obs, want_obs, rtol=1e-6, atol=1e-6)
            assert reward == want_reward == 1
            assert terminated == bool(want_term)
            assert truncated == bool(ENV.is_truncated(state, PARAMS))
            port.set_state(np.asarray(want_obs), port.time)
            if terminated or truncated:
                break
        lengths.append(port.time)
    assert all(5 <= n < 500 for n in lengths), lengths  # random actions fall early


def test_reset_distribution_is_gymnax_range():
    rng = np.random.default_rng(2)
    port = ports.CartPole()
    draws = np.array([port.reset(rng) for _ in range(4000)], np.float64)
    assert np.abs(draws).max() <= 0.05
    for col in range(4):
        counts = np.histogram(draws[:, col], bins=4, range=(-0.05, 0.05))[0]
        assert np.all(np.abs(counts - 1000) < 120), counts
