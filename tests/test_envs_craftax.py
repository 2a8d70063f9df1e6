"""Craftax suite: row flags translated from Craftax's one `done`, achievements per
episode, uint8 pixels in Crafter's geometry (real craftax; skipped without the extra)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("craftax")

from dreamerjax import envs  # noqa: E402
from dreamerjax.envs.compiled import craftax as cx  # noqa: E402

SYMBOLIC = "craftax_Craftax-Classic-Symbolic-v1"


@pytest.fixture(scope="module")
def symbolic():
    spec = envs.make_env(SYMBOLIC, dict_obs=True)
    init = jax.jit(lambda k: envs.collector_init(spec, k))
    step = jax.jit(lambda s, a, k: envs.collector_step(spec, s, a, k))
    return spec, init, step


def _force(state, **fields):
    env_state = state.env_state.replace(**{
        k: jnp.asarray(v, jnp.asarray(getattr(state.env_state, k)).dtype)
        for k, v in fields.items()})
    return state.replace(env_state=env_state)


def test_spec(symbolic):
    spec, _, _ = symbolic
    assert spec.obs_space == (("vector", (1345,), "float32"),)
    assert spec.discrete and spec.num_actions == 17 and spec.episode_limit == 10000
    names = [k for k, _ in spec.episode_keys]
    assert len(names) == 22 and "log_achievement_collect_diamond" in names
    assert envs.make_env(SYMBOLIC, 77).episode_limit == 77


def test_forced_termination_is_terminal_with_achievements(symbolic):
    spec, init, step = symbolic
    key = jax.random.PRNGKey(0)
    state, row = init(key)
    assert bool(row["is_first"]) and float(row["reward"]) == 0.0
    ach = np.zeros(22, bool)
    ach[cx._constants("Classic").Achievement.COLLECT_WOOD.value] = True
    state = _force(state, player_health=0, player_recover=0.0, achievements=ach, timestep=5)
    state, row, end = step(state, jnp.int32(0), key)  # NOOP: dead stays dead
    assert bool(row["is_last"]) and bool(row["is_terminal"]) and not bool(row["is_first"])
    assert bool(end.ended) and bool(end.terminal)
    stats = {k: int(v) for k, v in end.stats.items()}
    assert stats.pop("log_achievement_collect_wood") == 1 and set(stats.values()) == {0}
    # Held on is_last: the next row is a reset row that ignores the action.
    state2, row2, end2 = step(state, jnp.int32(5), jax.random.PRNGKey(1))
    assert bool(row2["is_first"]) and not bool(row2["is_last"]) and float(row2["reward"]) == 0
    assert not bool(end2.ended) and int(state2.env_state.timestep) == 0


def test_forced_time_limit_is_last_not_terminal(symbolic):
    spec, init, step = symbolic
    key = jax.random.PRNGKey(2)
    state, _ = init(key)
    state = _force(state, timestep=spec.episode_limit - 1)
    _, row, end = step(state, jnp.int32(0), key)
    assert bool(row["is_last"]) and not bool(row["is_terminal"])
    assert bool(end.ended) and not bool(end.terminal)
    # One step earlier nothing ends.
    state = _force(state, timestep=spec.episode_limit - 2)
    _, row, end = step(state, jnp.int32(0), key)
    assert not bool(row["is_last"]) and not bool(end.ended)


def test_rollout_rows(symbolic):
    spec, init, step = symbolic
    key = jax.random.PRNGKey(3)
    state, row = init(key)
    for t in range(30):
        k_a, k_e = jax.random.split(jax.random.fold_in(key, t))
        state, row, _ = step(state, jax.random.randint(k_a, (), 0, 17), k_e)
        assert not bool(row["is_first"]) and not bool(row["is_last"])
        assert row["obs"]["vector"].dtype == jnp.float32
    assert int(state.length) == 30 and int(state.env_state.timestep) == 30


def test_crafter_geometry_matches_pil_nearest_per_block():
    from PIL import Image
    rng = np.random.default_rng(0)
    native = rng.integers(0, 256, (63, 63, 3)).astype(np.uint8)
    for size in ((64, 64), (90, 96), (40, 40)):
        out = np.asarray(cx.pixels_to_image(jnp.asarray(native / 255.0, jnp.float32), 7, size))
        assert out.shape == (*size, 3) and out.dtype == np.uint8
        unit = (size[0] // 9, size[1] // 9)
        top, left = (size[0] - 9 * unit[0]) // 2, (size[1] - 9 * unit[1]) // 2
        for bi, bj in ((0, 0), (4, 7), (8, 8)):
            block = native[7 * bi:7 * bi + 7, 7 * bj:7 * bj + 7]
            want = np.asarray(Image.fromarray(block).resize(unit[::-1], Image.NEAREST))
            got = out[top + bi * unit[0]:top + (bi + 1) * unit[0],
                      left + bj * unit[1]:left + (bj + 1) * unit[1]]
            np.testing.assert_array_equal(got, want)
        mask = np.ones(size, bool)
        mask[top:top + 9 * unit[0], left:left + 9 * unit[1]] = False
        assert not out[mask].any()  # the border is black
    # At 64 x 64 the 7-pixel blocks are kept and the 64th row and column are black.
    out = np.asarray(cx.pixels_to_image(jnp.asarray(native / 255.0, jnp.float32), 7, (64, 64)))
    np.testing.assert_array_equal(out[:63, :63], native)


def test_pixels_reset_row_is_uint8_at_the_configured_size():
    spec = envs.make_env("craftax_Craftax-Classic-Pixels-v1", dict_obs=True)
    assert spec.obs_space == (("image", (64, 64, 3), "uint8"),)
    env_state, obs = jax.jit(spec.reset)(jax.random.PRNGKey(0))
    image = np.asarray(obs["image"])
    native = np.asarray(spec.env.get_obs(env_state))
    assert image.dtype == np.uint8 and native.shape == (63, 63, 3)
    np.testing.assert_array_equal(image[:63, :63], np.round(native * 255).astype(np.uint8))
    assert not image[63].any() and not image[:, 63].any() and image.max() > 0
    legacy = envs.make_env("craftax_Craftax-Classic-Pixels-v1")
    assert envs.row_spec(legacy)["obs"].dtype == jnp.float32  # single-array loops: /255


def test_unknown_task_and_bad_size():
    with pytest.raises(ValueError, match="unknown craftax env 'Classic'.*Pixels-v1"):
        envs.make_env("craftax_Classic")
    with pytest.raises(ValueError, match="craftax size"):
        envs.make_env("craftax_Craftax-Classic-Pixels-v1", size=(64,))
