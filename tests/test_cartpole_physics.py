"""benchmarks/cartpole_physics.py: its controller is one function of the state for numpy and
JAX alike, and the port's options really change dm_control's physics (an episode with them
is not the default episode, and it is the same episode again with them)."""

import numpy as np
import pytest
from _benchmarks import load

physics = load("cartpole_physics.py")


def test_the_controller_is_the_same_in_numpy_and_jax():
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(0)
    gains = physics.grid()[5]
    for _ in range(200):
        qpos = rng.uniform([-1.8, -4 * np.pi], [1.8, 4 * np.pi])
        qvel = rng.normal(0, 3, 2)
        a = physics.control(np, qpos, qvel, gains)
        b = physics.control(jnp, jnp.asarray(qpos, jnp.float32),
                            jnp.asarray(qvel, jnp.float32), gains)
        assert -1.0 <= a <= 1.0
        np.testing.assert_allclose(float(b), a, atol=2e-4)


def test_the_grid_is_every_gain_set_once():
    sets = physics.grid()
    assert len(sets) == np.prod([len(v) for v in physics.GRID.values()])
    assert len({tuple(sorted(s.items())) for s in sets}) == len(sets)
    assert all(set(s) == set(physics.GAIN_NAMES) for s in sets)


def test_the_ports_options_change_dm_controls_episode():
    pytest.importorskip("dm_control")
    actions = np.random.default_rng(1).uniform(-1, 1, 500)
    q0, v0, default, r0 = physics.dm_episode(3, actions=actions)
    q1, v1, euler, r1 = physics.dm_episode(3, actions=actions,
                                           options=physics.PLAYGROUND_OPTIONS)
    np.testing.assert_array_equal(q0, q1)   # the same reset
    np.testing.assert_array_equal(v0, v1)
    assert len(default) == len(euler) == 1000
    # one physics step apart already (RK4 against Euler), the same again when repeated
    assert default[0] != euler[0]
    again = physics.dm_episode(3, actions=actions, options=physics.PLAYGROUND_OPTIONS)
    np.testing.assert_array_equal(again[2], euler)
    assert again[3] == r1 and np.isfinite(r0)
