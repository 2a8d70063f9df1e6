"""The host suites compute what the reference's wrappers compute (embodied/ at 29eb964),
on the real packages: Atari's sticky actions as ALE reads them, actions normalised in the
reference's dtypes, DMC's float32 step rewards summed over the action repeat."""

from __future__ import annotations

import numpy as np
import pytest

from dreamerjax.envs.host import base as host

# ----------------------------------------------------------------------------- actions


def _float32_reference(a32, low, high):
    """NormalizeAction's arithmetic with its operands' dtypes (wrappers.py:88-91): the
    float32 action, the bounds in the space's dtype."""
    mask = np.isfinite(low) & np.isfinite(high)
    lo, hi = np.where(mask, low, -1), np.where(mask, high, 1)
    return np.where(mask, (a32 + np.float32(1)) / np.float32(2) * (hi - lo) + lo, a32)


def _float64(a32, low, high):
    a = np.asarray(a32, np.float64)
    return (a + 1.0) / 2.0 * (np.asarray(high, np.float64) - low) + low


def test_action_normalised_in_the_references_dtypes():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, 10000).astype(np.float32)
    # dm_control's bounds are float64: a + 1 rounds in float32, the rest in float64.
    low, high = np.full(a.shape, -1.0), np.full(a.shape, 1.0)
    ours = host.normalized_action(a, low, high)
    assert ours.dtype == np.float64
    np.testing.assert_array_equal(ours, _float32_reference(a, low, high))
    moved = np.abs(ours - _float64(a, low, high))
    assert moved.max() > 0 and moved.max() <= 2 ** -24 + 1e-15  # one float32 ulp of a + 1
    # A float32 Box ([-2, 2], Pendulum's) is normalised in float32 throughout.
    low32, high32 = np.full(a.shape, -2, np.float32), np.full(a.shape, 2, np.float32)
    ours = host.normalized_action(a, low32, high32)
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(ours, _float32_reference(a, low32, high32))
    assert (ours != _float64(a, low32, high32).astype(np.float32)).any()
    # Unbounded dims pass through clipped; the clip is float32's.
    inf = np.array([-np.inf, 0.0]), np.array([np.inf, 10.0])
    np.testing.assert_array_equal(
        host.normalized_action(np.array([3, -3], np.float32), *inf), [1.0, 0.0])


def test_dmc_action_reaches_the_physics_as_the_reference_computes_it():
    pytest.importorskip("dm_control")
    env = host.make_host_env("dmc_walker_walk", image=False)
    env.reset(seed=1)
    # 1e-8 + 1 rounds to 1 in float32: the reference's walker gets exactly 0, float64
    # arithmetic would give 1e-8.
    a = np.array([1e-8, -0.3, 0.7, 0.123456, -0.999999, 0.5], np.float32)
    env.step(a)
    ctrl = env.physics.data.ctrl.copy()
    low = np.full(6, -1.0)
    np.testing.assert_array_equal(ctrl, _float32_reference(a, low, -low))
    assert ctrl[0] == 0.0 and (ctrl != _float64(a, low, -low)).any()


# ----------------------------------------------------------------------------- DMC reward


def test_dmc_reward_is_float32_steps_summed_in_float64():
    pytest.importorskip("dm_control")
    from dm_control import suite
    env = host.make_host_env("dmc_walker_walk", image=False)
    raw = suite.load("walker", "walk", task_kwargs={"random": 2})
    env.reset(seed=2)
    raw.reset()
    rng = np.random.default_rng(2)
    differs = 0
    for _ in range(200):
        a = rng.uniform(-1, 1, 6).astype(np.float32)
        _, reward, _, _, _ = env.step(a)
        steps = []
        for _ in range(2):
            steps.append(raw.step(_float32_reference(a, np.full(6, -1.0), np.ones(6))).reward)
        want = float(np.float32(sum(float(np.float32(r)) for r in steps)))
        assert reward == want
        differs += reward != float(np.float32(sum(steps)))
    # Summing the float64 rewards first and rounding once is an ulp off on some rows.
    assert differs > 0


# ----------------------------------------------------------------------------- Atari


def _frames(env, seed, steps=120):
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    return np.stack([env.step(int(rng.integers(env.spec.num_actions)))[0]["image"]
                     for _ in range(steps)])


def test_atari_sticky_false_keeps_ales_default_as_the_reference():
    pytest.importorskip("ale_py")
    from dreamerjax.envs.host.atari import AtariEnv
    # The reference's order (repeat_action_probability after loadROM): sticky False and
    # True play the same frames; the literal setting leaves them.
    ref_off = _frames(AtariEnv("pong", sticky=False), 3)
    ref_on = _frames(AtariEnv("pong", sticky=True), 3)
    literal_off = _frames(AtariEnv("pong", sticky=False, sticky_literal=True), 3)
    literal_on = _frames(AtariEnv("pong", sticky=True, sticky_literal=True), 3)
    np.testing.assert_array_equal(ref_off, ref_on)
    np.testing.assert_array_equal(ref_on, literal_on)
    assert (literal_off != ref_off).any()
    # Reseeding keeps it: a fresh ALE per seed, not a second load of the same interface
    # (which would read the probability the first order wrote).
    env = AtariEnv("pong", sticky=False)
    _frames(env, 4)
    np.testing.assert_array_equal(_frames(env, 3), ref_off)

