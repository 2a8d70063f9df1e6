"""The chunk files of a replay directory (data/chunks.py) and the ring filled from rows
(data/replay.py replay_fill)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.data import chunks
from dreamerjax.data import replay as rp


def _rows(count, start=0, seed=0):
    """Deterministic rows of one stream in the reference's key names; episodes of 5."""
    t = np.arange(start, start + count)
    return {
        "vector": np.sin(t[:, None] * [1.0, 0.3, 0.7] + seed).astype(np.float32),
        "action": (t % 2).astype(np.int32),
        "reward": (t * 0.5).astype(np.float32),
        "is_first": t % 5 == 0,
        "is_last": t % 5 == 4,
        "is_terminal": t % 10 == 9,
    }


def _cat(parts):
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def test_uuid_text_is_the_reference_base62():
    # elements.UUID(1) -> '0' * 21 + '1'; 62 -> '10'; 16 bytes of 0xff round-trip.
    assert chunks.uuid_text((1).to_bytes(16, "big")) == "0" * 21 + "1"
    assert chunks.uuid_text((62).to_bytes(16, "big")) == "0" * 20 + "10"
    value = bytes(range(200, 216))
    assert chunks.uuid_bytes(chunks.uuid_text(value)) == value
    assert len(chunks.uuid_text(b"\xff" * 16)) == 22
    assert chunks.uuid_text(bytes(16)) == chunks.NO_SUCC


def test_stepid_is_uuid_and_big_endian_index():
    ids = chunks.stepids(bytes(range(16)), 254, 3)
    assert ids.shape == (3, 20) and ids.dtype == np.uint8
    assert ids[:, :16].tolist() == [list(range(16))] * 3
    assert ids[:, 16:].tolist() == [[0, 0, 0, 254], [0, 0, 0, 255], [0, 0, 1, 0]]


def test_writer_writes_full_chunks_once_and_links_them(tmp_path):
    w = chunks.ChunkWriter(tmp_path, 8)
    assert w.add(_rows(5)) == []
    written = w.add(_rows(15, start=5))  # rows 0..19: chunks of 0..7, 8..15; 4 pending
    assert len(written) == 2 and w.pending == 4 and w.state["rows"] == 16
    names = sorted(chunks.ChunkName.parse(p.name) for p in tmp_path.glob("*.npz"))
    assert [n.length for n in names] == [8, 8]
    (stream,) = chunks.scan(tmp_path)
    assert [n.length for n in stream.names] == [8, 8]
    assert stream.names[0].succ == stream.names[1].uuid
    assert stream.succ == w.state["uuid"]  # the next chunk is the writer's current one
    rows = chunks.read_streams(tmp_path)[0]
    want = _rows(16)
    assert set(rows) == set(want) | {"stepid"}
    for k, v in want.items():
        np.testing.assert_array_equal(rows[k], v)
        assert rows[k].dtype == v.dtype
    # stepid: the chunk's uuid and the row's index in it.
    first = chunks.uuid_bytes(stream.names[0].uuid)
    np.testing.assert_array_equal(rows["stepid"][:8], chunks.stepids(first, 0, 8))
    assert not list(tmp_path.glob(".*"))  # no temporary file left


def test_flush_completes_the_partial_chunk_and_the_stream_goes_on(tmp_path):
    w = chunks.ChunkWriter(tmp_path, 8)
    w.add(_rows(11))
    path = w.flush()
    assert chunks.ChunkName.parse(path.name).length == 3
    assert w.flush() is None and w.pending == 0  # nothing pending: nothing written
    w.add(_rows(10, start=11))  # a fresh chunk of 8 after the partial one
    w.flush()
    (stream,) = chunks.scan(tmp_path)
    assert [n.length for n in stream.names] == [8, 3, 8, 2]
    rows = chunks.read_streams(tmp_path)[0]
    np.testing.assert_array_equal(rows["reward"], _rows(21)["reward"])
    idx = rows["stepid"][:, 16:].copy().view(">u4")[:, 0]
    assert idx.tolist() == [*range(8), *range(3), *range(8), *range(2)]


def test_resume_from_state_drops_the_lost_chunks_and_continues(tmp_path):
    w = chunks.ChunkWriter(tmp_path, 4)
    w.add(_rows(6))
    w.flush()
    state = dict(w.state)  # what a checkpoint keeps
    w.add(_rows(9, start=6))  # a later part of the run that is lost (killed) ...
    w.flush()
    assert chunks.scan(tmp_path)[0].rows == 15
    r = chunks.ChunkWriter.resume(tmp_path, 4, state)
    assert len(r.removed) == 3  # the chunks of rows 6..14
    r.add(_rows(9, start=6))  # ... written again by the resumed run
    r.flush()
    (stream,) = chunks.scan(tmp_path)
    assert [n.length for n in stream.names] == [4, 2, 4, 4, 1]
    np.testing.assert_array_equal(chunks.read_streams(tmp_path)[0]["reward"],
                                  _rows(15)["reward"])


def test_streams_of_several_writers_and_mismatched_rows(tmp_path):
    ws = [chunks.ChunkWriter(tmp_path, 4) for _ in range(3)]
    for i, w in enumerate(ws):
        w.add(_rows(6 + i, seed=i))
        w.flush()
    streams = chunks.read_streams(tmp_path)
    assert sorted(len(s["reward"]) for s in streams) == [6, 7, 8]
    by_len = {len(s["reward"]): s for s in streams}
    for i in range(3):
        np.testing.assert_array_equal(by_len[6 + i]["vector"], _rows(6 + i, seed=i)["vector"])
    bad = _rows(2)
    bad["vector"] = bad["vector"][:, :2]
    with pytest.raises(ValueError, match="'vector' is float32 \\(2,\\)"):
        ws[0].add(bad)
    with pytest.raises(ValueError, match="stepid"):
        ws[0].add(dict(_rows(1), stepid=np.zeros((1, 20), np.uint8)))


def _one_line(excinfo):
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def test_not_a_replay_and_damaged_or_missing_chunks(tmp_path):
    with pytest.raises(chunks.ReplayDirError) as e:
        chunks.read_streams(tmp_path / "nope")
    assert "no such replay directory" in _one_line(e)
    with pytest.raises(chunks.ReplayDirError) as e:
        chunks.read_streams(tmp_path)
    assert "not a replay directory" in _one_line(e)
    (tmp_path / "x.npz").write_bytes(b"")
    with pytest.raises(chunks.ReplayDirError) as e:
        chunks.read_streams(tmp_path)
    assert "x.npz: not a chunk name" in _one_line(e)
    (tmp_path / "x.npz").unlink()

    w = chunks.ChunkWriter(tmp_path, 4)
    w.add(_rows(12))
    w.flush()
    stream = chunks.scan(tmp_path)[0]
    middle = tmp_path / stream.names[1].filename
    data = middle.read_bytes()
    middle.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(chunks.ReplayDirError) as e:
        chunks.read_streams(tmp_path)
    assert stream.names[1].filename in _one_line(e) and "damaged" in _one_line(e)
    middle.unlink()  # missing: the third chunk's stream begins mid-episode (row 8)
    with pytest.raises(chunks.ReplayDirError) as e:
        chunks.read_streams(tmp_path)
    assert stream.names[2].filename in _one_line(e) and "missing" in _one_line(e)
    # A name whose length disagrees with its arrays.
    first = tmp_path / stream.names[0].filename
    first.rename(tmp_path / stream.names[0].filename.replace("-4.npz", "-5.npz"))
    with pytest.raises(chunks.ReplayDirError) as e:
        chunks.read_streams(tmp_path)
    assert "-5.npz: damaged chunk" in _one_line(e)


def test_chunk_rows_and_schema_rows_round_trip():
    T, D, S, C = 6, 5, 4, 3
    rng = np.random.default_rng(0)
    rows = {"obs": {"vector": rng.standard_normal((T, 3)).astype(np.float32),
                    "image": rng.integers(0, 255, (T, 2, 2, 1), dtype=np.uint8)},
            "action": np.arange(T, dtype=np.int32) % 2,
            "reward": np.ones(T, np.float32), "is_first": np.arange(T) == 0,
            "is_last": np.zeros(T, bool), "is_terminal": np.zeros(T, bool),
            "deter": rng.standard_normal((T, D)).astype(np.float32),
            "stoch": rng.integers(0, C, (T, S)).astype(np.int32)}
    flat = chunks.chunk_rows(rows, classes=C)
    assert flat["dyn/stoch"].shape == (T, S, C) and flat["dyn/stoch"].dtype == np.float32
    assert chunks.chunk_format(flat) == "e3f0224"
    obs = {"vector": ((3,), np.dtype("float32")), "image": ((2, 2, 1), np.dtype("uint8"))}
    back = chunks.schema_rows(flat, obs, ((), np.dtype("int32")), D, S)
    for k in ("action", "reward", "is_first", "deter", "stoch"):
        np.testing.assert_array_equal(back[k], rows[k])
    np.testing.assert_array_equal(back["obs"]["image"], rows["obs"]["image"])
    # 29eb964's latents, and no latents (zeros, the initial state).
    old = dict(chunks.chunk_rows(rows), deter=rows["deter"], stoch=rows["stoch"],
               reset=rows["is_last"])
    assert chunks.chunk_format(old) == "29eb964"
    np.testing.assert_array_equal(chunks.schema_rows(old, obs, ((), np.int32), D, S)["stoch"],
                                  rows["stoch"])
    none = chunks.schema_rows(chunks.chunk_rows(rows), obs, ((), np.int32), D, S)
    assert not none["deter"].any() and not none["stoch"].any()
    with pytest.raises(ValueError, match="'image' is uint8 \\(2, 2, 1\\), the config needs "
                                         "uint8 \\(4, 4, 1\\)"):
        chunks.schema_rows(flat, dict(obs, image=((4, 4, 1), np.uint8)), ((), np.int32), D, S)
    with pytest.raises(ValueError, match="no 'depth' rows"):
        chunks.schema_rows(flat, dict(obs, depth=((1,), np.float32)), ((), np.int32), D, S)


def _example():
    return {"obs": {"vector": jnp.zeros((3,), jnp.float32)}, "action": jnp.zeros((), jnp.int32),
            "reward": jnp.zeros((), jnp.float32), "is_first": jnp.zeros((), bool),
            "is_last": jnp.zeros((), bool), "is_terminal": jnp.zeros((), bool),
            "deter": jnp.zeros((2,), jnp.float32), "stoch": jnp.zeros((2,), jnp.int32)}


def _ticks(E, T, seed):
    rng = np.random.default_rng(seed)
    return {"obs": {"vector": rng.standard_normal((E, T, 3)).astype(np.float32)},
            "action": rng.integers(0, 2, (E, T)).astype(np.int32),
            "reward": rng.standard_normal((E, T)).astype(np.float32),
            "is_first": rng.random((E, T)) < 0.2, "is_last": rng.random((E, T)) < 0.2,
            "is_terminal": rng.random((E, T)) < 0.1,
            "deter": rng.standard_normal((E, T, 2)).astype(np.float32),
            "stoch": rng.integers(0, 4, (E, T, 2)).astype(np.int32)}


def _assert_same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("T", [0, 5, 11, 30])
@pytest.mark.parametrize("selector", [None, rp.Selector(uniform=0.5, priority=0.5,
                                                         initial=0.75)])
def test_replay_fill_equals_adding_tick_by_tick(T, selector):
    E, cap, L = 3, 11, 4
    state = rp.replay_init(E, cap, _example(), length=L, selector=selector)
    state = rp.replay_add(state, jax.tree.map(lambda x: x[:, 0], _ticks(E, 1, 9)))  # not empty
    rows = _ticks(E, T, T)
    want = state
    for t in range(T):
        want = rp.replay_add(want, jax.tree.map(lambda x, t=t: x[:, t], rows))
    got = rp.replay_fill(state, rows)
    _assert_same(got, want)
    # numpy leaves (a host replay before it is placed) give the same rows, as numpy.
    host = state.replace(data=jax.tree.map(np.asarray, state.data))
    filled = rp.replay_fill(host, rows)
    assert all(isinstance(v, np.ndarray) for v in jax.tree.leaves(filled.data))
    _assert_same(filled.data, want.data)


def test_replay_fill_offline_queues_nothing():
    E, cap, L = 2, 40, 4
    state = rp.replay_init(E, cap, _example(), length=L)
    filled = rp.replay_fill(state, _ticks(E, 21, 0), online=False)
    head, tail = rp._online_window(filled)
    assert int(tail) - int(head) == 0 and int(tail) == E * 5
    # online (the default) keeps every window the rows completed in the queue, as adds do.
    head, tail = rp._online_window(rp.replay_fill(state, _ticks(E, 21, 0)))
    assert (int(head), int(tail)) == (0, E * 5)
