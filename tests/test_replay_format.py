"""The replay directory format both ways with the reference (tests/data/replay_format,
made by benchmarks/replay_format/make_fixtures.py running the reference unmodified):
directories the reference's own Replay wrote (e3f0224 and 29eb964) read row-equal, and
chunks dreamerjax's ChunkWriter writes read by the reference's own Replay.load
row-equal."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from _benchmarks import load

from dreamerjax.data import chunks

DATA = pathlib.Path(__file__).resolve().parent / "data" / "replay_format"
gen = load("replay_format/make_fixtures.py")


def _by_stream(streams):
    """{stream index: rows}, the index read from the rows' reward (1000 stream + row)."""
    out = {int(rows["reward"][0]) // 1000: rows for rows in streams}
    assert len(out) == len(streams)
    return out


def _check_stepids(rows, stream):
    """Each row's stepid is its chunk's uuid and its index in that chunk."""
    want = np.concatenate([chunks.stepids(chunks.uuid_bytes(n.uuid), 0, n.length)
                           for n in stream.names])
    np.testing.assert_array_equal(rows["stepid"], want)


@pytest.mark.parametrize("version", ["e3f0224", "29eb964"])
def test_a_directory_the_reference_wrote_reads_row_equal(version):
    directory = DATA / version
    files = chunks.scan(directory)
    streams = chunks.read_streams(directory)
    assert len(streams) == 2
    for stream, rows in zip(files, streams, strict=True):
        _check_stepids(rows, stream)
    got = _by_stream(streams)
    lengths = {s: [n.length for n in f.names]
               for s, f in zip(_by_stream(streams), files, strict=True)}
    # The reference's saves wrote each stream's partial chunk, then went on in a new one.
    assert lengths == {0: [8, 8, 3, 6], 1: [8, 5, 2]}
    for s, total in enumerate(gen.totals()):
        want = gen.steps(s, 0, total, version)
        dropped = "log/x" if version == "e3f0224" else "log_x"
        assert set(got[s]) == (set(want) - {dropped}) | {"stepid"}
        for key in set(want) - {dropped}:
            assert got[s][key].dtype == want[key].dtype, key
            np.testing.assert_array_equal(got[s][key], want[key], err_msg=key)
        assert chunks.chunk_format(got[s]) == version


@pytest.mark.parametrize("version", ["e3f0224", "29eb964"])
def test_the_reference_rows_as_dreamerjax_replay_rows(version):
    rows = _by_stream(chunks.read_streams(DATA / version))[1]
    obs = {"vector": ((3,), np.dtype("float32"))}
    out = chunks.schema_rows(rows, obs, ((), np.dtype("int32")), gen.DETER, gen.STOCH)
    want = gen.steps(1, 0, gen.totals()[1], "29eb964")  # the latents as indices
    np.testing.assert_array_equal(out["obs"]["vector"], want["vector"])
    np.testing.assert_array_equal(out["deter"], want["deter"])
    np.testing.assert_array_equal(out["stoch"], want["stoch"])
    with pytest.raises(ValueError, match=r"^replay: 'vector' is float32 \(3,\), the config "
                                         r"needs float32 \(4,\)$"):
        chunks.schema_rows(rows, {"vector": ((4,), np.float32)}, ((), np.int32), 4, 2)


def test_chunks_dreamerjax_writes_are_what_the_reference_loads(tmp_path):
    gen.write_with_chunkwriter(tmp_path)  # the writes the fixture's generator made
    files = chunks.scan(tmp_path)
    assert sorted(n.length for f in files for n in f.names) == sorted(
        np.load(DATA / "e3f0224_loaded.npz")["chunk_lengths"].tolist())
    ours = _by_stream(chunks.read_streams(tmp_path))
    with np.load(DATA / "e3f0224_loaded.npz") as f:
        loaded = {k.removeprefix("items/"): f[k] for k in f.files if k.startswith("items/")}
        num_items = int(f["num_items"])
    # The reference's items: every window of LENGTH rows of every stream, no window across
    # two streams, none missing (its load joined our chunks by their succ links).
    L = gen.LENGTH
    assert num_items == sum(total - L + 1 for total in gen.totals())
    where = {}
    for i, reward in enumerate(loaded["reward"][:, 0]):
        where[(int(reward) // 1000, int(reward) % 1000)] = i
    assert sorted(where) == sorted(
        (s, t) for s, total in enumerate(gen.totals()) for t in range(total - L + 1))
    uuid_map = {}
    for (s, t), i in where.items():
        for key, value in loaded.items():
            mine = ours[s][key][t:t + L]
            assert mine.dtype == value.dtype, key
            if key == "stepid":  # the same index in the same chunk, by a uuid of its own
                np.testing.assert_array_equal(mine[:, 16:], value[i][:, 16:])
                for a, b in zip(value[i][:, :16], mine[:, :16], strict=True):
                    assert uuid_map.setdefault(a.tobytes(), b.tobytes()) == b.tobytes()
            else:
                np.testing.assert_array_equal(mine, value[i], err_msg=key)
    assert set(ours[0]) == set(loaded)
    assert len(set(uuid_map.values())) == len(uuid_map) == 7  # one chunk for one chunk
