"""A run's replay to and from replay directories: written as one (`dreamerjax replay
export`), and a fresh run's replay filled from one (`dreamerjax train --replay-from`).
Reading a replay directory is data/replay_dir.py's; what is here needs the run: its
records, checkpoints and setup.

Nothing here changes the directories it reads.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np

from dreamerjax.data import chunks
from dreamerjax.data.replay_dir import (
    RUN_REPLAY,
    folder_of_seed,
    has_chunks,
    load_rows,
    seed_folder,
)

# ------------------------------------------------------------------------------- export


def export(run_dir: str | os.PathLike, out: str | os.PathLike) -> list[str]:
    """A run's replay written to `out` as seed folders of chunk files; returns one line
    per seed. From the run's own chunk folders (RUN/replay/seed_<S>) where it has them,
    copied file by file after every seed's are read whole (a seed folder gone, a damaged
    or missing chunk: ReplayDirError naming it, nothing written); else from its latest
    checkpoint's ring (a run that kept its replay only there): each env's rows the ring
    holds, from the first episode start among them (a ring that wrapped begins inside an
    episode), one stream per env, chunks of chunks.CHUNKSIZE rows, the latents with
    replay_context as the reference stores them. run_dir may be RUN/replay, which stands
    for RUN. Nothing in the run directory changes."""
    from dreamerjax.run import records

    run_dir, out = Path(run_dir), Path(out)
    if run_dir.name == RUN_REPLAY and not (run_dir / records.CONFIG_FILE).exists() and (
            run_dir.parent / records.CONFIG_FILE).exists():
        run_dir = run_dir.parent  # RUN/replay given: the run it is the replay of
    config, seeds = records.read_run_config(run_dir)
    if out.resolve().is_relative_to(run_dir.resolve()):
        raise ValueError(f"{out}: inside the run directory {run_dir}; export writes "
                         "elsewhere (the run's directory is left as it is)")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out}: not empty; export writes into a new or empty directory")
    if (run_dir / RUN_REPLAY).is_dir():
        return _copy_folders(run_dir, seeds, out)
    lines, ring = [], None
    for s, seed in enumerate(seeds):
        dest = seed_folder(out, seed)
        if ring is None:
            ring = _checkpoint_ring(run_dir, len(seeds))
        index, data, count = ring
        classes = config.agent.rssm.classes if config.run.replay_context > 0 else None
        dest.mkdir(parents=True, exist_ok=True)
        total = 0
        for e in range(count.shape[1]):
            rows = _held_rows(data, s, e, int(count[s, e]))
            if rows is None:
                continue
            writer = chunks.ChunkWriter(dest, chunks.CHUNKSIZE)
            writer.add(chunks.chunk_rows(rows, classes))
            writer.flush()
            total += writer.rows
        lines.append(f"seed {seed}: {total:,} rows of {count.shape[1]} envs from checkpoint "
                     f"{index}'s replay -> {dest}")
    return lines


def _copy_folders(run_dir: Path, seeds, out: Path) -> list[str]:
    """export of a run whose replay is its chunk folders: every seed's folder read whole
    (each chunk once, one at a time), then copied file by file; one line per seed."""
    from dreamerjax.run import replay_files

    sources = {}
    for seed in seeds:
        src = seed_folder(run_dir / RUN_REPLAY, seed)
        if not src.is_dir():
            raise chunks.ReplayDirError(f"{replay_files.seed_missing(run_dir, seed)}; "
                                        "restore the folder from a copy of the run")
        if not has_chunks(src):
            raise chunks.ReplayDirError(f"{src}: no chunk files (the run has written none "
                                        f"of seed {seed}'s rows)")
        files = chunks.scan(src)
        for stream in files:
            for _ in chunks.stream_chunks(src, stream):  # every chunk whole before a copy
                pass
        sources[seed] = (src, files)
    lines = []
    for seed, (src, files) in sources.items():
        dest = seed_folder(out, seed)
        dest.mkdir(parents=True, exist_ok=True)
        for stream in files:
            for name in stream.names:
                shutil.copyfile(src / name.filename, dest / name.filename)
        lines.append(f"seed {seed}: {sum(f.rows for f in files):,} rows in "
                     f"{len(files)} streams from {src} -> {dest}")
    return lines


def _checkpoint_ring(run_dir: Path, num_seeds: int):
    """(index, data, count) of the latest good checkpoint's replay: data the ring's rows
    as a nested dict of numpy arrays [seeds, envs, capacity, ...] (the row schema),
    count [seeds, envs]."""
    from dreamerjax.run import checkpoint as ckpt
    from dreamerjax.run import replay_files

    found = ckpt.latest_verified(run_dir)
    if found is None:
        raise ValueError(f"{run_dir}: no replay chunk folders ({RUN_REPLAY}/seed_<S>) and "
                         "no checkpoint to read a replay from")
    index = found[0]
    if replay_files.META_KEY in found[1]:  # the ring's rows are in the files, not here
        raise chunks.ReplayDirError(
            f"{run_dir / RUN_REPLAY}: missing (the run's replay: its chunk files, whose rows "
            f"checkpoint {index} does not hold); restore it from a copy of the run")
    layout = ckpt._read_raw_meta(run_dir, index).get(ckpt.LAYOUT_KEY)
    if layout is None:
        raise ValueError(f"{run_dir}: checkpoint {index} holds one array per leaf (a run "
                         "of several processes); export reads a one-process checkpoint")
    prefix = ".replay.data"
    names = [e[0] for e in layout if e[0].startswith(prefix)]
    if not names:
        raise ValueError(f"{run_dir}: checkpoint {index} holds no replay rows")
    leaves = ckpt.read_leaves(run_dir, index, [*names, ".replay.count"])
    data: dict = {}
    for name in names:
        keys = re.findall(r"\['([^']*)'\]", name[len(prefix):])
        node = data
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = leaves[name]
    count = leaves[".replay.count"].reshape(num_seeds, -1)
    return index, data, count


def _held_rows(data: dict, seed: int, env: int, count: int) -> dict | None:
    """One env's rows the ring holds, oldest first, from the first episode start among
    them; None when it holds none."""
    import jax

    capacity = jax.tree.leaves(data)[0].shape[2]
    lo = max(0, count - capacity)
    slots = np.arange(lo, count) % capacity
    rows = jax.tree.map(lambda v: v[seed, env, slots], data)
    starts = np.flatnonzero(rows["is_first"])
    if not len(starts):
        return None
    return jax.tree.map(lambda v: v[starts[0]:], rows)


# ------------------------------------------------------------------------------- filling


def _spec(setup) -> tuple[dict, tuple, int, int]:
    """The config's (obs, action, deter, stoch) as load_rows takes them."""
    spaces, rssm = setup.spaces, setup.config.agent.rssm
    action = ((), np.dtype("int32")) if spaces.act_discrete else (
        (spaces.act_dim,), np.dtype("float32"))
    return spaces.obs_dict(), action, rssm.deter, rssm.stoch


def check(setup, seeds) -> None:
    """run.replay_from against the run before anything compiles: every seed has its
    folder, the first chunk's keys are the config's (chunks.schema_rows), and every chunk
    reads whole, one at a time (a damaged or missing one refused now, not after the
    compile): ValueError, one line, naming the folder or file and the first mismatch."""
    directory = setup.run.replay_from
    if not directory:
        return
    obs, action, deter, stoch = _spec(setup)
    try:
        read = set()
        for seed in seeds:
            folder = folder_of_seed(directory, seed)
            streams = chunks.scan(folder)
            head = streams[0].names[0]
            chunks.schema_rows(chunks.read_chunk(folder, head), obs, action, deter, stoch,
                               where=f"--replay-from {folder / head.filename}")
            if folder not in read:  # one folder filling every seed is read once
                read.add(folder)
                for stream in streams:
                    for _ in chunks.stream_chunks(folder, stream):
                        pass
    except chunks.ReplayDirError as e:
        raise ValueError(f"--replay-from: {e}") from None


def fill_states(states, setup, seeds):
    """A fresh run's states (every leaf [seeds, ...]) with each seed's replay filled from
    run.replay_from (load_rows, then data/replay.py replay_fill with online=False: the
    loaded windows are not queued, as the reference's Replay.load does not queue them);
    the arrays keep their shardings and memory. One process only."""
    import jax

    from dreamerjax.data import replay as replay_lib

    if jax.process_count() > 1:
        raise ValueError("--replay-from: a run of one process (each process would read "
                         "every seed's folder)")
    obs, action, deter, stoch = _spec(setup)
    replay = states.replay
    host = jax.device_get({"data": replay.data, "count": replay.count,
                           "online_head": replay.online_head, "prio": replay.prio})
    filled = []
    for s, seed in enumerate(seeds):
        loaded = load_rows(setup.run.replay_from, seed, setup.run.num_envs, obs, action,
                           deter, stoch)
        one = replay.replace(**jax.tree.map(lambda x, s=s: np.asarray(x[s]), host))
        filled.append(replay_lib.replay_fill(one, loaded.rows, online=False))
    stacked = {name: jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                                  *[getattr(f, name) for f in filled])
               for name in ("data", "count", "online_head", "prio")
               if getattr(replay, name) is not None}
    placed = {name: jax.tree.map(lambda new, old: jax.device_put(new, old.sharding),
                                 value, getattr(replay, name))
              for name, value in stacked.items()}
    return states.replace(replay=replay.replace(**placed))
