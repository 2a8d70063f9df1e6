"""Replay directories read: what one holds (`dreamerjax replay info`) and the rows of one
seed's folder as a run's replay takes them (`--replay-from`), with numpy and the chunk
format (data/chunks.py) alone, so a script reads a replay without the run layer.

A replay directory is either one folder of chunk files (data/chunks.py: the reference's
own `logdir/replay`, or one seed's) or a folder of seed folders `seed_<S>`, each one of
chunk files (what `replay export` writes, and a dreamerjax run's `RUN/replay`). A
directory that is neither but holds a `replay/` folder that is one (a dreamerjax run's
directory, a reference run's logdir) stands for that folder. Filling a run: seed S reads
`seed_<S>` when the directory has seed folders, else every seed reads the one folder.

Nothing here changes the directories it reads.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import numpy as np

from dreamerjax.data import chunks

RUN_REPLAY = "replay"  # RUN/replay: a run's own chunk folders, one per seed
SEED_FOLDER = "seed_{seed}"


def seed_folder(directory: str | os.PathLike, seed: int) -> Path:
    """DIR/seed_<seed>: one seed's chunk files in a directory of seed folders."""
    return Path(directory) / SEED_FOLDER.format(seed=int(seed))


def has_chunks(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("*.npz"))


def _seed_folders(directory: Path) -> dict[int | None, Path]:
    """{None: directory} when it holds chunk files, else {seed: folder} of its seed folders
    that do (none: {})."""
    if has_chunks(directory):
        return {None: directory}
    seeds = {}
    for path in sorted(directory.iterdir()):
        found = re.fullmatch(SEED_FOLDER.format(seed=r"(\d+)"), path.name)
        if found and has_chunks(path):
            seeds[int(found.group(1))] = path
    return dict(sorted(seeds.items()))


def folders(directory: str | os.PathLike) -> dict[int | None, Path]:
    """{seed: its folder} of a directory of seed folders, or {None: directory} for one
    folder of chunk files, of `directory` or else of its `replay/` folder (a run's
    directory); ReplayDirError (one line, saying where a replay is) for anything else."""
    directory = Path(directory)
    if not directory.is_dir():
        raise chunks.ReplayDirError(f"{directory}: no such replay directory")
    found = _seed_folders(directory)
    inner = directory / RUN_REPLAY
    if not found and inner.is_dir():
        found = _seed_folders(inner)
        directory = inner
    if not found:
        below = _replays_below(directory)
        raise chunks.ReplayDirError(
            f"{directory}: not a replay directory (no chunk files "
            "{time}-{uuid}-{succ}-{length}.npz, nor seed_<S> folders of them); "
            + (f"the replay directories in it: {', '.join(below)}" if below else
               f"a dreamerjax run's replay is RUN/{RUN_REPLAY} (give RUN or RUN/{RUN_REPLAY}; "
               "`dreamerjax replay export RUN DIR` writes one of a run that kept it in its "
               f"checkpoint), a reference run's LOGDIR/{RUN_REPLAY}"))
    return found


def _replays_below(directory: Path, most: int = 3) -> list[str]:
    """The first `most` folders directly in `directory` that are replay directories or
    hold one as `replay/` (run directories), as paths; a look one level down only."""
    out = []
    for child in sorted(p for p in directory.iterdir() if p.is_dir()):
        for candidate in (child, child / RUN_REPLAY):
            if candidate.is_dir() and _seed_folders(candidate):
                out.append(str(candidate))
                break
        if len(out) == most:
            break
    return out


def folder_of_seed(directory: str | os.PathLike, seed: int) -> Path:
    """The folder seed `seed` reads (the module's docstring); ReplayDirError naming the
    missing seed folder."""
    found = folders(directory)
    if None in found:
        return found[None]
    if seed not in found:
        raise chunks.ReplayDirError(
            f"{next(iter(found.values())).parent}: no folder seed_{seed} (it has "
            f"{', '.join(p.name for p in found.values())}); give one folder of chunk files "
            "to fill every seed from it")
    return found[seed]


# ------------------------------------------------------------------------------- info


def describe(directory: str | os.PathLike) -> list[str]:
    """The lines of `dreamerjax replay info`: per folder its format, streams, rows and
    chunk files, then the keys of a row with their shapes and dtypes (a seed folder's only
    where they differ from the one before). Reads every chunk whole, one at a time, so a
    damaged chunk, or a missing one (a stream that begins inside an episode), is refused
    with ReplayDirError naming the file, as export and --replay-from refuse it."""
    lines, found, shown = [], folders(directory), None
    for seed, folder in found.items():
        files = chunks.scan(folder)
        first = chunks.read_chunk(folder, files[0].names[0])
        rows = [s.rows for s in files]
        episodes = 0
        for stream in files:  # every chunk read whole: a damaged or missing one is named
            for data in chunks.stream_chunks(folder, stream):
                episodes += int(np.sum(data.get("is_first", 0)))
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
