"""On-device replay: ring validity, online FIFO, uniform items, latent write-back, vmap."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.data import replay as rp

D, S = 3, 2


def _example():
    return dict(obs=np.zeros(2, np.float32), action=np.int32(0), reward=np.float32(0),
                is_first=False, is_last=False, is_terminal=False,
                deter=np.zeros(D, np.float32), stoch=np.zeros(S, np.int32))


def _rows(num_envs, row, deter=0.0):
    """Rows whose obs encode (env, row index + 1); 0 marks an unwritten slot."""
    ex = _example()
    rows = {k: np.stack([np.asarray(v)] * num_envs) for k, v in ex.items()}
    rows["obs"] = np.array([[e, row + 1] for e in range(num_envs)], np.float32)
    rows["deter"] = np.full((num_envs, D), deter, np.float32)
    rows["stoch"] = np.full((num_envs, S), int(deter), np.int32)
    return rows


def _pending(state):
    """Queued items not yet sampled (live ones only)."""
    head, tail = rp._online_window(state)
    return tail - head


def _pairs(idx):
    return list(zip(idx.env.tolist(), idx.start.tolist(), strict=True))


_add = jax.jit(rp.replay_add)


@functools.partial(jax.jit, static_argnums=2)
def _sample(state, key, batch):
    return rp.replay_sample(state, key, batch)


def _filled(num_envs, capacity, length, rows, deter=0.0):
    state = rp.replay_init(num_envs, capacity, _example(), length=length)
    for r in range(rows):
        state = _add(state, _rows(num_envs, r, deter))
    return state


def test_init_rejects_bad_shapes():
    with pytest.raises(ValueError, match="shorter than one window"):
        rp.replay_init(2, 4, _example(), length=5)
    bad = _example()
    bad.pop("deter")
    with pytest.raises(ValueError, match="keys"):
        rp.replay_init(2, 10, bad, length=5)


def test_gate_counts_items():
    E, L = 16, 65
    state = _filled(E, 100, L, 64)
    assert int(rp.replay_num_items(state)) == 0
    state = _add(state, _rows(E, 64))
    assert int(rp.replay_num_items(state)) == 16
    with pytest.raises(ValueError, match="length"):
        rp.replay_sample(state, jax.random.PRNGKey(0), 16, 64)


def test_windows_are_written_consecutive_and_inside_the_ring():
    E, C, L, B = 3, 20, 5, 64
    state = rp.replay_init(E, C, _example(), length=L)
    key = jax.random.PRNGKey(0)
    seen_starts = set()
    for r in range(70):  # wraps the ring 3.5 times
        state = _add(state, _rows(E, r))
        if int(rp.replay_num_items(state)) < 1:
            assert r < L - 1
            continue
        key, sk = jax.random.split(key)
        state, batch, idx = _sample(state, sk, B)
        obs = np.asarray(batch["obs"])
        env, start = np.asarray(idx.env), np.asarray(idx.start)
        c = r + 1
        marker = obs[..., 1] - 1  # absolute row index, -1 if unwritten
        np.testing.assert_array_equal(obs[..., 0], np.broadcast_to(env[:, None], (B, L)))
        np.testing.assert_array_equal(marker, start[:, None] + np.arange(L))
        assert marker.min() >= max(0, c - C) and marker.max() <= c - 1
        if r == 69:
            seen_starts |= set(start.tolist())
    # After wrapping, uniform draws reach both ends of the valid range [c - C, c - L].
    for _ in range(20):
        key, sk = jax.random.split(key)
        _, _, idx = _sample(state, sk, B)
        seen_starts |= set(np.asarray(idx.start).tolist())
    assert seen_starts == set(range(70 - C, 70 - L + 1))


def test_annotation_marks_first_row():
    state = _filled(2, 30, 4, 10)
    _, batch, _ = _sample(state, jax.random.PRNGKey(1), 8)
    assert np.all(np.asarray(batch["is_first"])[:, 0])
    assert not np.any(np.asarray(batch["is_first"])[:, 1:])
    assert not np.any(np.asarray(batch["is_last"]))


def test_online_queue_fifo_then_uniform():
    E, L = 2, 4
    state = _filled(E, 100, L, 13)  # rows 4, 8, 12 pushed windows 1, 5, 9 per env
    assert int(_pending(state)) == 6
    state, _, idx = _sample(state, jax.random.PRNGKey(0), 4)
    assert _pairs(idx) == [(0, 1), (1, 1), (0, 5), (1, 5)]
    state, _, idx = _sample(state, jax.random.PRNGKey(1), 4)
    assert _pairs(idx)[:2] == [(0, 9), (1, 9)]
    assert int(_pending(state)) == 0
    # Row 16 pushes window 13 of both envs; it comes first in the next batch.
    for r in range(13, 17):
        state = _add(state, _rows(E, r))
    assert int(_pending(state)) == 2
    state, _, idx = _sample(state, jax.random.PRNGKey(2), 3)
    assert _pairs(idx)[:2] == [(0, 13), (1, 13)]
    assert int(_pending(state)) == 0


def test_online_queue_skips_overwritten_windows():
    E, C, L = 1, 10, 4
    state = _filled(E, C, L, 30)  # queued windows 1, 5, ..., 25; ring holds rows 20..29
    assert int(_pending(state)) == 2
    state, _, idx = _sample(state, jax.random.PRNGKey(0), 3)
    assert idx.start.tolist()[:2] == [21, 25]
    assert 20 <= int(idx.start[2]) <= 26
    assert int(_pending(state)) == 0


def test_write_latents_lands_on_trained_rows_later_batch_wins():
    E, C, L = 2, 12, 4
    state = _filled(E, C, L, 10)
    index = rp.ReplayIndex(env=jnp.array([0, 1, 0]), start=jnp.array([2, 3, 3]))
    vals = 100 * jnp.arange(3)[:, None] + 1 + jnp.arange(L - 1)[None]  # [B, L-1]
    deter = jnp.broadcast_to(vals[..., None], (3, L - 1, D)).astype(jnp.float32)
    stoch = jnp.broadcast_to(vals[..., None], (3, L - 1, S)).astype(jnp.int32)
    state = jax.jit(rp.replay_write_latents)(state, index, deter, stoch)
    got = np.asarray(state.data["deter"])[..., 0]
    want = np.zeros((E, C))
    want[0, 3] = 1  # batch 0, rows 3..5; rows 4, 5 also in batch 2, which wins
    want[0, 4:7] = [201, 202, 203]
    want[1, 4:7] = [101, 102, 103]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(state.data["stoch"])[..., 0], want)
    # Nothing else changed.
    np.testing.assert_array_equal(state.data["obs"], _filled(E, C, L, 10).data["obs"])


def test_write_latents_skips_overwritten_rows():
    E, C, L = 1, 12, 4
    state = _filled(E, C, L, 10)
    index = rp.ReplayIndex(env=jnp.array([0]), start=jnp.array([1]))  # trained rows 2, 3, 4
    # Meanwhile rows 10..14 arrive; row 12 overwrites slot 0, row 14 slot 2 (old row 2).
    for r in range(10, 15):
        state = _add(state, _rows(E, r, deter=-1.0))
    deter = jnp.full((1, L - 1, D), 7.0)
    stoch = jnp.full((1, L - 1, S), 7, jnp.int32)
    state = rp.replay_write_latents(state, index, deter, stoch)
    got = np.asarray(state.data["deter"])[0, :, 0]
    np.testing.assert_array_equal(got[[0, 1, 2]], [-1, -1, -1])  # rows 12, 13, 14 intact
    np.testing.assert_array_equal(got[[3, 4]], [7, 7])  # rows 3, 4 still held
    np.testing.assert_array_equal(got[5:10], 0)  # rows 5..9 untouched
    np.testing.assert_array_equal(got[10:], -1)  # rows 10, 11 (new)
    assert np.asarray(state.data["stoch"])[0, 2, 0] == -1


def test_vmap_over_seeds_under_jit_matches_single():
    E, C, L, B, seeds = 3, 16, 4, 12, 3  # 9 queued windows, then 3 uniform
    init = jax.vmap(lambda _: rp.replay_init(E, C, _example(), length=L))(jnp.arange(seeds))
    assert init.count.shape == (seeds, E) and init.data["obs"].shape == (seeds, E, C, 2)

    @jax.jit
    def run(state, keys):
        def tick(state, r):
            rows = jax.tree.map(jnp.asarray, _rows(E, 0))
            rows["obs"] = jnp.stack([jnp.arange(E), jnp.full(E, r + 1)], -1).astype(jnp.float32)
            return rp.replay_add(state, rows), None

        state, _ = jax.lax.scan(jax.vmap(tick, in_axes=(0, None)), state, jnp.arange(23))
        return jax.vmap(lambda s, k: rp.replay_sample(s, k, B))(state, keys)

    keys = jax.random.split(jax.random.PRNGKey(4), seeds)
    state, batch, idx = run(init, keys)
    assert batch["obs"].shape == (seeds, B, L, 2)
    single = _filled(E, C, L, 23)
    for s in range(seeds):
        one = jax.tree.map(lambda x, s=s: x[s], state)
        st1, b1, i1 = rp.replay_sample(single, keys[s], B)
        np.testing.assert_array_equal(i1.start, idx.start[s])
        np.testing.assert_array_equal(b1["obs"], batch["obs"][s])
        assert int(one.online_head) == int(st1.online_head)
    # Different seed keys draw different uniform windows.
    assert len({tuple(np.asarray(idx.start[s]).tolist()) for s in range(seeds)}) > 1


def test_write_latents_with_longer_context():
    E, C, L = 1, 12, 4
    state = _filled(E, C, L, 10)
    index = rp.ReplayIndex(env=jnp.array([0]), start=jnp.array([3]))
    deter = jnp.full((1, 2, D), 5.0)  # context K = 2: rows 5, 6
    state = rp.replay_write_latents(state, index, deter, jnp.full((1, 2, S), 5, jnp.int32))
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(state.data["deter"])[0, :, 0]),
                                  [5, 6])
    with pytest.raises(ValueError, match="do not fit"):
        rp.replay_write_latents(state, index, jnp.zeros((1, 5, D)), jnp.zeros((1, 5, S)))


def test_grow_keeps_every_row_in_its_slot_and_refuses_what_it_cannot():
    """A resumed run whose --steps grew (driver.restore_run): the rings of a replay that
    never wrapped grow with every row at its slot and zeros after; a wrapped ring and a
    smaller capacity are refused (tests/test_driver.py's slow test resumes a whole run)."""
    state = _filled(2, 10, 4, 7)
    grown = rp.replay_grow(state, 15)
    assert grown.capacity == 15 and grown.length == state.length
    np.testing.assert_array_equal(grown.count, state.count)
    for name, v in state.data.items():
        g = np.asarray(grown.data[name])
        np.testing.assert_array_equal(g[:, :10], np.asarray(v))
        assert not g[:, 10:].any(), name
    assert rp.replay_grow(state, 10) is state
    with pytest.raises(ValueError, match="cannot shrink"):
        rp.replay_grow(state, 8)
    with pytest.raises(ValueError, match="has wrapped"):
        rp.replay_grow(_filled(2, 10, 4, 12), 15)
    # Sampling the grown replay draws only written windows, as the original does.
    idx = _sample(grown, jax.random.PRNGKey(0), 64)[2]
    assert int(np.max(np.asarray(idx.start))) + 4 <= 7
