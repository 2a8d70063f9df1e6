"""Replay directories as the commands use them: what one holds (`dreamerjax replay info`),
a run's replay written as one (`dreamerjax replay export`), and the rows a run's replay is
filled with from one (`dreamerjax train --replay-from`).

A replay directory is either one folder of chunk files (run/chunks.py: the reference's
own `logdir/replay`, or one seed's) or a folder of seed folders `seed_<S>`, each one of
chunk files (what `replay export` writes, and a dreamerjax run's `RUN/replay`). Filling a
run: seed S reads `seed_<S>` when the directory has seed folders, else every seed reads
the one folder.

Nothing here changes the directories it reads.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

import numpy as np

from dreamerjax.run import chunks

RUN_REPLAY = "replay"  # RUN/replay: a run's own chunk folders, one per seed
SEED_FOLDER = "seed_{seed}"


def seed_folder(directory: str | os.PathLike, seed: int) -> Path:
    """DIR/seed_<seed>: one seed's chunk files in a directory of seed folders."""
    return Path(directory) / SEED_FOLDER.format(seed=int(seed))


def _has_chunks(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("*.npz"))


def folders(directory: str | os.PathLike) -> dict[int | None, Path]:
    """{seed: its folder} of a directory of seed folders, or {None: directory} for one
    folder of chunk files; ReplayDirError (one line) for anything else."""
    directory = Path(directory)
    if not directory.is_dir():
        raise chunks.ReplayDirError(f"{directory}: no such replay directory")
    if _has_chunks(directory):
        return {None: directory}
    seeds = {}
    for path in sorted(directory.iterdir()):
        found = re.fullmatch(SEED_FOLDER.format(seed=r"(\d+)"), path.name)
        if found and _has_chunks(path):
            seeds[int(found.group(1))] = path
    if not seeds:
        raise chunks.ReplayDirError(
            f"{directory}: not a replay directory (no chunk files "
            "{time}-{uuid}-{succ}-{length}.npz, nor seed_<S> folders of them)")
    return dict(sorted(seeds.items()))


def folder_of_seed(directory: str | os.PathLike, seed: int) -> Path:
    """The folder seed `seed` reads (the module's docstring); ReplayDirError naming the
    missing seed folder."""
    found = folders(directory)
    if None in found:
        return found[None]
    if seed not in found:
        raise chunks.ReplayDirError(
            f"{directory}: no folder seed_{seed} (it has "
            f"{', '.join(p.name for p in found.values())}); give one folder of chunk files "
            "to fill every seed from it")
    return found[seed]


# ------------------------------------------------------------------------------- info


def describe(directory: str | os.PathLike) -> list[str]:
    """The lines of `dreamerjax replay info`: per folder its format, streams, rows and
    chunk files, then the keys of a row with their shapes and dtypes (a seed folder's only
    where they differ from the one before). Reads the first chunk whole and of the others
    their is_first rows alone."""
    lines, found, shown = [], folders(directory), None
    for seed, folder in found.items():
        files = chunks.scan(folder)
        first = chunks.read_chunk(folder, files[0].names[0])
        rows = [s.rows for s in files]
        episodes = sum(int(np.sum(chunks.read_chunk(folder, n, ("is_first",)).get(
            "is_first", 0))) for s in files for n in s.names)
        name = folder.name if seed is not None else str(folder)
        lines.append(
            f"{name}: {chunks.chunk_format(first)} format, {len(files)} streams, "
            f"{sum(rows):,} rows (per stream {min(rows):,} to {max(rows):,}), "
            f"{sum(len(s.names) for s in files)} chunk files, {episodes:,} episode starts")
        keys = [f"  {k:<16} {v.dtype.name} {tuple(v.shape[1:])}" for k, v in first.items()]
        if keys != shown:
            lines += keys
            shown = keys
    return lines


# ------------------------------------------------------------------------------- export


def export(run_dir: str | os.PathLike, out: str | os.PathLike) -> list[str]:
    """A run's replay written to `out` as seed folders of chunk files; returns one line
    per seed. From the run's own chunk folders (RUN/replay/seed_<S>) where it has them,
    copied file by file after they are read whole; else from its latest checkpoint's ring
    (a run that kept its replay only there): each env's rows the ring holds, from the
    first episode start among them (a ring that wrapped begins inside an episode), one
    stream per env, chunks of chunks.CHUNKSIZE rows, the latents with replay_context as
    the reference stores them. Nothing in the run directory changes."""
    from dreamerjax.run import records

    run_dir, out = Path(run_dir), Path(out)
    config, seeds = records.read_run_config(run_dir)
    if out.resolve().is_relative_to(run_dir.resolve()):
        raise ValueError(f"{out}: inside the run directory {run_dir}; export writes "
                         "elsewhere (the run's directory is left as it is)")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out}: not empty; export writes into a new or empty directory")
    lines, ring = [], None
    for s, seed in enumerate(seeds):
        dest = seed_folder(out, seed)
        src = seed_folder(run_dir / RUN_REPLAY, seed)
        if _has_chunks(src):
            files = chunks.scan(src)
            for stream in files:
                chunks.read_stream(src, stream)  # every chunk whole before a copy
            dest.mkdir(parents=True, exist_ok=True)
            for stream in files:
                for name in stream.names:
                    shutil.copyfile(src / name.filename, dest / name.filename)
            lines.append(f"seed {seed}: {sum(f.rows for f in files):,} rows in "
                         f"{len(files)} streams from {src} -> {dest}")
            continue
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


def _checkpoint_ring(run_dir: Path, num_seeds: int):
    """(index, data, count) of the latest good checkpoint's replay: data the ring's rows
    as a nested dict of numpy arrays [seeds, envs, capacity, ...] (the row schema),
    count [seeds, envs]."""
    from dreamerjax.run import checkpoint as ckpt

    found = ckpt.latest_verified(run_dir)
    if found is None:
        raise ValueError(f"{run_dir}: no replay chunk folders ({RUN_REPLAY}/seed_<S>) and "
                         "no checkpoint to read a replay from")
    index = found[0]
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


@dataclasses.dataclass(frozen=True)
class Loaded:
    """What a run fills one seed's replay with: rows [envs, T, ...] in the row schema,
    the folder they came from, its format and streams."""

    rows: dict
    folder: Path
    format: str
    streams: int


def load_rows(directory: str | os.PathLike, seed: int, num_envs: int, obs: dict,
              action: tuple, deter: int, stoch: int) -> Loaded:
    """Seed `seed`'s rows from a replay directory, as [num_envs, T, ...] row-schema
    arrays for data/replay.py replay_fill.

    Its streams go to the envs as they are when there are num_envs of them, all of one
    length (a run of this config wrote them); otherwise they are cut into episodes (at
    is_first rows), dealt in order to the env with the fewest rows, and every env keeps
    its first T rows, T the fewest any env got (the ring holds the same count for every
    env). obs, action, deter, stoch: the config's (chunks.schema_rows), checked first:
    ValueError naming the folder and the first mismatched key."""
    folder = folder_of_seed(directory, seed)
    files = chunks.scan(folder)
    first = chunks.read_stream(folder, files[0])
    chunks.schema_rows({k: v[:1] for k, v in first.items()}, obs, action, deter, stoch,
                       where=str(folder))  # the keys before reading the rest
    streams = [first] + [chunks.read_stream(folder, s) for s in files[1:]]
    streams = [chunks.schema_rows(s, obs, action, deter, stoch, where=str(folder))
               for s in streams]
    lengths = {len(s["reward"]) for s in streams}
    if len(streams) == num_envs and len(lengths) == 1:
        per_env = [[s] for s in streams]
    else:
        per_env = [[] for _ in range(num_envs)]
        sizes = [0] * num_envs
        for stream in streams:
            starts = [*np.flatnonzero(stream["is_first"]), len(stream["reward"])]
            for a, b in zip(starts[:-1], starts[1:], strict=True):
                e = int(np.argmin(sizes))
                per_env[e].append(_tree_slice(stream, a, b))
                sizes[e] += b - a
    joined = [_tree_cat(parts) for parts in per_env if parts]
    T = min(len(j["reward"]) for j in joined) if len(joined) == num_envs else 0
    if T == 0:
        raise chunks.ReplayDirError(
            f"{folder}: {sum(len(s['reward']) for s in streams):,} rows in "
            f"{len(streams)} streams do not give each of the {num_envs} envs an episode")
    rows = _tree_stack([_tree_slice(j, 0, T) for j in joined])
    return Loaded(rows, folder, chunks.chunk_format(first), len(streams))


def _tree_slice(tree, a, b):
    if isinstance(tree, dict):
        return {k: _tree_slice(v, a, b) for k, v in tree.items()}
    return tree[a:b]


def _tree_cat(trees):
    if isinstance(trees[0], dict):
        return {k: _tree_cat([t[k] for t in trees]) for k in trees[0]}
    return np.concatenate(trees, 0)


def _tree_stack(trees):
    if isinstance(trees[0], dict):
        return {k: _tree_stack([t[k] for t in trees]) for k in trees[0]}
    return np.stack(trees, 0)


def _spec(setup) -> tuple[dict, tuple, int, int]:
    """The config's (obs, action, deter, stoch) as load_rows takes them."""
    spaces, rssm = setup.spaces, setup.config.agent.rssm
    action = ((), np.dtype("int32")) if spaces.act_discrete else (
        (spaces.act_dim,), np.dtype("float32"))
    return spaces.obs_dict(), action, rssm.deter, rssm.stoch


def check(setup, seeds) -> None:
    """run.replay_from against the run before anything compiles: every seed has its
    folder and the first chunk's keys are the config's (chunks.schema_rows): ValueError,
    one line, naming the folder and the first mismatch."""
    directory = setup.run.replay_from
    if not directory:
        return
    obs, action, deter, stoch = _spec(setup)
    try:
        for seed in seeds:
            folder = folder_of_seed(directory, seed)
            head = chunks.scan(folder)[0].names[0]
            chunks.schema_rows(chunks.read_chunk(folder, head), obs, action, deter, stoch,
                               where=f"--replay-from {folder / head.filename}")
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
