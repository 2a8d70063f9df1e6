"""The replay-format fixtures of tests/data/replay_format, made with the reference.

    PYTHONPATH=.:REF python benchmarks/replay_format/make_fixtures.py OUT e3f0224
    PYTHONPATH=.:REF29 python benchmarks/replay_format/make_fixtures.py OUT 29eb964

REF: a checkout of danijar/dreamerv3 at e3f0224, REF29 one at 29eb964, each imported
unmodified in an environment that runs it (tests/data/replay_format/README.md). The steps
are a fixed function of (stream, row), `steps` below, added by two workers in turn in two
phases with a save after each, so that both streams end the first phase with a partial
chunk that the save writes.

e3f0224 writes OUT/e3f0224/ (the reference's Replay writes its chunk files) and
OUT/e3f0224_loaded.npz (dreamerjax's ChunkWriter writes the same steps, the reference's
Replay.load reads them: every item it would sample, as it assembles it). 29eb964 writes
OUT/29eb964/ with that version's Replay and its row keys.

The test (tests/test_replay_format.py) imports this module for `steps`, `PHASES` and
`write_with_chunkwriter`; the reference is imported only inside `main`.
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import numpy as np

CHUNKSIZE = 8
LENGTH = 4  # the reference Replay's window length for the loaded items
PHASES = ((19, 13), (6, 2))  # rows per stream (worker 0, worker 1) before each save
DETER, STOCH, CLASSES = 4, 2, 3


def steps(stream: int, start: int, count: int, version: str = "e3f0224") -> dict:
    """Rows start .. start + count - 1 of a stream, in the reference's keys of `version`:
    reward = 1000 stream + row (so every row says where it belongs), episodes of 5 rows,
    a 'log/' ('log_' at 29eb964) key the replay drops, and the latents of replay_context."""
    t = np.arange(start, start + count)
    rows = {
        "vector": np.sin(t[:, None] * np.array([1.0, 0.3, 0.7]) + stream).astype(np.float32),
        "action": ((t + stream) % 2).astype(np.int32),
        "reward": (1000 * stream + t).astype(np.float32),
        "is_first": t % 5 == 0,
        "is_last": t % 5 == 4,
        "is_terminal": t % 10 == 9,
    }
    deter = np.cos(t[:, None] * np.linspace(0.1, 0.4, DETER) + stream).astype(np.float32)
    index = (t[:, None] + np.arange(STOCH) + stream) % CLASSES
    if version == "e3f0224":
        rows["dyn/deter"] = deter
        rows["dyn/stoch"] = (index[..., None] == np.arange(CLASSES)).astype(np.float32)
        rows["log/x"] = t.astype(np.float32)
    else:
        rows["reset"] = rows["is_last"].copy()
        rows["deter"] = deter
        rows["stoch"] = index.astype(np.int32)
        rows["log_x"] = t.astype(np.float32)
    return rows


def totals() -> tuple[int, ...]:
    """Rows per stream after both phases."""
    return tuple(sum(p[s] for p in PHASES) for s in range(len(PHASES[0])))


def write_with_chunkwriter(directory) -> None:
    """The steps of both streams written by dreamerjax's ChunkWriter, flushed where the
    reference saves."""
    from dreamerjax.data import chunks

    writers = [chunks.ChunkWriter(directory, CHUNKSIZE) for _ in PHASES[0]]
    done = [0] * len(writers)
    for phase in PHASES:
        for s, (writer, count) in enumerate(zip(writers, phase, strict=True)):
            writer.add(steps(s, done[s], count))
            done[s] += count
        for writer in writers:
            writer.flush()


def _add_with_reference(replay, version: str) -> None:
    """The steps of both streams added to the reference's Replay as its driver adds them
    (the workers in turn, one row each), saved after each phase."""
    done = [0] * len(PHASES[0])
    for phase in PHASES:
        for i in range(max(phase)):
            for s, count in enumerate(phase):
                if i < count:
                    row = {k: v[0] for k, v in steps(s, done[s] + i, 1, version).items()}
                    replay.add(row, s)
        for s, count in enumerate(phase):
            done[s] += count
        replay.save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("version", choices=("e3f0224", "29eb964"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.version == "29eb964":
        from embodied.replay.replay import Replay  # 29eb964's embodied/replay/replay.py

        directory = args.out / "29eb964"
        _add_with_reference(Replay(LENGTH, None, directory, chunksize=CHUNKSIZE,
                                   save_wait=True), "29eb964")
        print(sorted(p.name for p in directory.glob("*.npz")))
        return

    from embodied.core.replay import Replay  # e3f0224's embodied/core/replay.py

    directory = args.out / "e3f0224"
    _add_with_reference(Replay(LENGTH, None, directory, chunksize=CHUNKSIZE,
                               save_wait=True), "e3f0224")
    print(sorted(p.name for p in directory.glob("*.npz")))

    with tempfile.TemporaryDirectory() as tmp:
        write_with_chunkwriter(tmp)
        replay = Replay(LENGTH, None, tmp, chunksize=CHUNKSIZE)
        replay.load()
        items = [replay._getseq(chunkid, index) for chunkid, index in replay.items.values()]
        out = {f"items/{k}": np.stack([it[k] for it in items]) for k in items[0]}
        names = sorted(c.filename for c in replay.chunks.values())
        out["chunk_lengths"] = np.sort([c.length for c in replay.chunks.values()])
        out["num_items"] = np.array(len(replay))
        print(len(replay), "items from", names)
    np.savez_compressed(args.out / "e3f0224_loaded.npz", **out)


if __name__ == "__main__":
    main()
