"""benchmarks/reference_run/gymnax_ports.py: the numpy float32 Acrobot-v1 the reference
harness can train on equals gymnax's (environments/classic_control/acrobot.py).

Only the physics module is imported (it has no embodied import), so this runs in our venv.
"""

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _benchmarks import load

ports = load("reference_run/gymnax_ports.py")

ENV, PARAMS = gymnax.make("Acrobot-v1")
State = type(ENV.reset_env(jax.random.PRNGKey(0), PARAMS)[1])


def _state(s, time):
    return State(joint_angle1=s[..., 0], joint_angle2=s[..., 1], velocity_1=s[..., 2],
                 velocity_2=s[..., 3], time=time)


def _array(state):
    return jnp.stack([state.joint_angle1, state.joint_angle2, state.velocity_1,
                      state.velocity_2], -1)


def _gymnax_step(s, time, action):
    """gymnax's step_env and is_truncated of one state: (obs, next state [4], reward,
    terminated, truncated)."""
    obs, new, reward, terminated, _ = ENV.step_env(
        jax.random.PRNGKey(0), _state(s, time), action, PARAMS)
    return obs, _array(new), reward, terminated, ENV.is_truncated(new, PARAMS)


# _gymnax_step vmapped and jitted once, in a child that compiles as users' programs compile
# (tests/_xla.py): the bounds below are float32 rounding of XLA's default build; the tier's
# quick code generation rounds gymnax's Runge-Kutta step differently (up to 4.5e-3 in a
# velocity where the default build's differs from float64 by 6.9e-4).
STEP_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import jax, numpy as np
from test_reference_acrobot_port import _gymnax_step
d = np.load(sys.argv[2])
out = jax.jit(jax.vmap(_gymnax_step))(d["s"], d["time"], d["action"])
np.savez(sys.argv[3], *[np.asarray(x) for x in out])
"""


@pytest.fixture(scope="module")
def gymnax_step(tmp_path_factory):
    """(s [n, 4], time [n], action [n]) -> gymnax's (obs, next state, reward, terminated,
    truncated), each [n, ...]."""
    from _xla import run_in_users_build

    tmp = tmp_path_factory.mktemp("gymnax_step")

    def step(s, time, action):
        np.savez(tmp / "in.npz", s=s, time=time, action=action)
        run_in_users_build(STEP_CHILD, tmp / "in.npz", tmp / "out.npz")
        out = np.load(tmp / "out.npz")
        return [out[f"arr_{i}"] for i in range(5)]
    return step


def test_constants_are_gymnax_defaults():
    p = ports.Acrobot
    assert (p.dt, p.m1, p.m2, p.l1, p.lc1, p.lc2, p.i1, p.i2) == (
        np.float32(PARAMS.dt), PARAMS.link_mass_1, PARAMS.link_mass_2, PARAMS.link_length_1,
        PARAMS.link_com_pos_1, PARAMS.link_com_pos_2, PARAMS.link_moi, PARAMS.link_moi)
    assert PARAMS.torque_noise_max == 0.0  # the port has no noise
    np.testing.assert_array_equal(p.torques, PARAMS.available_torque)
    assert (p.max_vel_1, p.max_vel_2) == (np.float32(PARAMS.max_vel_1),
                                          np.float32(PARAMS.max_vel_2))
    assert p.limit == PARAMS.max_steps_in_episode == 500
    assert p.num_actions == ENV.action_space(PARAMS).n
    np.testing.assert_array_equal(p.obs_high, ENV.observation_space(PARAMS).high)


def test_steps_equal_gymnax_on_random_states(gymnax_step):
    """Angles over the whole circle, speeds up to and past the clips, every action: every
    reward and flag exact, the next state to float32 rounding. Both are float32 Runge-Kutta
    steps whose velocity terms reach dtheta^2 ~ 900, so they round differently where XLA
    and numpy order the operations differently: on these 3,000 states gymnax's own float32
    step differs from its float64 step by up to 6.9e-4 in a velocity and the port's by up
    to 1.7e-3, with the same median (3.5e-7); hence the median bound of 1e-6 and the
    largest of 2e-3 (angles 1e-4)."""
    rng = np.random.default_rng(0)
    n = 3000
    s = np.stack([rng.uniform(-np.pi, np.pi, n), rng.uniform(-np.pi, np.pi, n),
                  rng.uniform(-14, 14, n), rng.uniform(-30, 30, n)], -1).astype(np.float32)
    time = rng.integers(0, 500, n).astype(np.int32)
    action = rng.integers(0, 3, n).astype(np.int32)
    want = [np.asarray(x) for x in gymnax_step(s, time, action)]
    assert 0 < want[3].sum() < n  # both outcomes are checked
    got = []
    for i in range(n):
        port = ports.Acrobot()
        port.set_state(s[i], time[i])
        obs, reward, terminated, truncated = port.step(action[i])
        assert obs.dtype == np.float32 and obs.shape == (6,)
        assert isinstance(reward, np.float32)
        assert reward == want[2][i]
        assert terminated == bool(want[3][i])
        assert truncated == bool(want[4][i]) == (time[i] + 1 >= 500)
        got.append(port.s)
    err = np.abs(np.array(got) - want[1])
    assert np.median(err) < 1e-6
    assert err[:, :2].max() < 1e-4 and err[:, 2:].max() < 2e-3


def test_rollout_and_reset():
    """An episode with one action sequence: the port follows gymnax step by step (re-synced
    on gymnax's state, so per-step error cannot compound), truncation at the 500th step
    only, and reset draws in gymnax's range."""
    step = jax.jit(lambda st, a: ENV.step_env(jax.random.PRNGKey(0), st, a, PARAMS))
    rng = np.random.default_rng(1)
    port = ports.Acrobot()
    obs = port.reset(rng)
    assert np.abs(port.s).max() <= 0.1 and port.time == 0 and obs.shape == (6,)
    state = _state(jnp.asarray(port.s), 0)
    for t in range(1, 501):
        action = int(rng.integers(0, 3))
        want_obs, state, want_reward, terminated, _ = step(state, action)
        obs, reward, port_terminated, truncated = port.step(action)
        np.testing.assert_allclose(obs, want_obs, rtol=1e-5, atol=1e-5)
        assert reward == want_reward and port_terminated == bool(terminated)
        assert truncated == bool(ENV.is_truncated(state, PARAMS)) == (t == 500)
        port.set_state(np.asarray(_array(state)), port.time)
    draws = []
    for _ in range(2000):
        port.reset(rng)
        draws.append(port.s)
    draws = np.array(draws)
    assert draws.dtype == np.float32 and np.abs(draws).max() <= 0.1
    # Uniform on [-0.1, 0.1] in each of the four: each half holds about half the draws.
    assert np.all(np.abs((draws > 0).mean(0) - 0.5) < 0.05)
