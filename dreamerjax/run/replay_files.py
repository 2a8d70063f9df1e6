"""A run's replay as files: the rows it collected, in chunks, and the latents changed since.

    RUN/replay/seed_<seed>/            one folder per seed: the replay's chunk files
                                       (data/chunks.py), one stream per env
    RUN/replay/seed_<seed>/latents/    <checkpoint>-p<process>.npz: rows whose stored
                                       latents changed (below)

Written while the run trains: at every log point the rows the envs added since the
previous one (only those, read from the ring's newest slots) go to their env's chunk
writer, which writes each full chunk once; at a checkpoint every writer writes its partial
chunk too (as the reference's Replay.save completes its current chunks,
embodied/core/replay.py:295-309 @e3f0224), so the chunks on disk hold every row up to the
checkpoint. The checkpoint then holds the agent, the optimiser, the counters and the
replay's index (counts, online-queue position, priorities), not the ring's rows
(checkpoint.py saves trainers.without_rows of the state), and a resume rebuilds the ring
from the files (`ring`).

Rows change after they are written: the latent write-back (data/replay.py
replay_write_latents, replay_context > 0) replaces the stored deter / stoch of rows the
run trained on. The replay marks those rows (ReplayState.dirty, one bool per row) and a
checkpoint writes the latents of the marked rows the ring still holds to one file per
seed and process (env [M] int32, row [M] int64, deter [M, D], stoch [M, S]), then clears
the mask. A resume applies a seed's files after its chunks, oldest first, so every row
gets the value it had at the checkpoint, bit for bit. The files a checkpoint needs are
listed in its meta. The snapshot rule: when the listed files and the new one would hold
more bytes than the latents of every row the ring holds, the checkpoint writes those
(a snapshot, read from the ring) in place of the new file and lists it alone; so the
listed files stay under twice the ring's latents, and each row-latent written costs at
most one more in a snapshot. Files that no kept checkpoint lists are removed.

The writers' state (where each env's chunk sequence stands) and the latent files' list go
into the checkpoint's meta (META_KEY); a resume continues the same chunk sequences, and
removes the chunks and latent files written after its checkpoint by the run it resumes
(killed before its next checkpoint): no row twice, none missing. A chunk or latent file
that is missing or unreadable is named in one line (ReplayFilesError); the resume stops
rather than train on a replay with a hole in it.

Over several processes each process writes the streams of the envs on its own devices
and its own latent files; their states are gathered into process 0's meta.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.data import chunks
from dreamerjax.data.replay_dir import RUN_REPLAY, seed_folder

LATENTS_DIR = "latents"
META_KEY = "replay_files"  # in a checkpoint's meta: the writers' state and latent files
LATENT_KEYS = ("deter", "stoch")  # the row entries the latent write-back changes


class ReplayFilesError(ValueError):
    """A chunk or latent file a resume needs is missing or unreadable (one line)."""


def seed_dir(run_dir: str | os.PathLike, seed: int) -> Path:
    """RUN/replay/seed_<seed>: a seed's chunk files."""
    return seed_folder(Path(run_dir) / RUN_REPLAY, seed)


def _latents_dir(run_dir, seed: int) -> Path:
    return seed_dir(run_dir, seed) / LATENTS_DIR


def _latent_name(index: int, process: int) -> str:
    return f"{int(index):08d}-p{int(process)}.npz"


# ----------------------------------------------------------------------------- the ring
# Shards: the run's [seeds, envs, capacity, ...] replay leaves as this process holds them
# (one per distinct index: a replicated shard once), each with its global (seed, env)
# offsets.


def _shards(arr: jax.Array) -> list[tuple[tuple[slice, ...], jax.Array]]:
    seen, out = set(), []
    for shard in arr.addressable_shards:
        key = tuple((s.start, s.stop) for s in shard.index[:2])
        if key not in seen:
            seen.add(key)
            out.append((shard.index, shard.data))
    return sorted(out, key=lambda x: [s.start or 0 for s in x[0][:2]])


def _on_device(x):
    return jax.device_put(x, jax.memory.Space.Device)


@functools.partial(jax.jit, static_argnames=("n", "host"))
def _newest(v: jax.Array, first: jax.Array, n: int, host: bool) -> jax.Array:
    """Slots first .. first + n - 1 (mod capacity) of every [seed, env] of one shard
    v [s, e, capacity, ...] -> [s, e, n, ...] on the device. Two slices of n slots (at
    first, or the ring's last n when the range wraps, and the ring's first n), as the
    replay's own host moves read windows (data/replay.py): XLA moves slices of host
    memory, it does not compute on them."""
    cap = v.shape[2]
    start = jnp.minimum(first, cap - n)
    a = jax.lax.dynamic_slice_in_dim(v, start, n, axis=2)
    b = jax.lax.slice_in_dim(v, 0, n, axis=2)
    if host:
        a, b = _on_device(a), _on_device(b)
    pos = first + jnp.arange(n)
    wrapped = (pos >= cap).reshape(1, 1, n, *(1,) * (v.ndim - 3))
    here = jnp.clip(pos - start, 0, n - 1)
    there = jnp.clip(pos - cap, 0, n - 1)
    return jnp.where(wrapped, jnp.take(b, there, axis=2), jnp.take(a, here, axis=2))


@functools.partial(jax.jit, static_argnames=("host",))
def _gather(v: jax.Array, s: jax.Array, e: jax.Array, slot: jax.Array, host: bool
            ) -> jax.Array:
    """v[s, e, slot] of one shard v [s, e, capacity, ...] for index arrays [M] -> [M, ...]
    on the device; in host memory one row at a time (a slice each, not a gather)."""
    if not host:
        return v[s, e, slot]
    zero = jnp.zeros((), jnp.int32)
    tail = v.shape[3:]
    out = jnp.zeros((s.shape[0], *tail), v.dtype)

    def body(i, out):
        row = jax.lax.dynamic_slice(v, (s[i], e[i], slot[i]) + (zero,) * len(tail),
                                    (1, 1, 1, *tail))
        return jax.lax.dynamic_update_index_in_dim(out, _on_device(row)[0, 0], i, 0)

    return jax.lax.fori_loop(0, s.shape[0], body, out)


def _bucket(m: int) -> int:
    """The padded length of m gathered rows (a power of two >= 256): few shapes compile."""
    return max(256, 1 << max(0, (m - 1).bit_length()))


def _rows_of(replay, first: int, n: int) -> dict[tuple[int, int], dict]:
    """{(seed position, env): rows (the replay's row tree, [n, ...] leaves)} of ring slots
    first .. first + n - 1 of this process's envs."""
    host = replay.memory == "host"
    leaves, tree = jax.tree.flatten(replay.data)
    flat: dict[tuple[int, int], list[np.ndarray]] = {}
    for leaf in leaves:
        for index, data in _shards(leaf):
            block = np.asarray(_newest(data, jnp.int32(first), n, host))
            s0, e0 = index[0].start or 0, index[1].start or 0
            for i in range(block.shape[0]):
                for j in range(block.shape[1]):
                    flat.setdefault((s0 + i, e0 + j), []).append(block[i, j])
    return {key: jax.tree.unflatten(tree, parts) for key, parts in flat.items()}


def _local_count(replay) -> int:
    """Rows written per env (every env of every seed holds the same count)."""
    return int(np.asarray(_shards(replay.count)[0][1]).reshape(-1)[0])


def _held_row(slot: np.ndarray, count: int, capacity: int) -> np.ndarray:
    """The absolute row held at ring slot `slot` after `count` rows."""
    return count - 1 - (count - 1 - slot) % capacity


# ----------------------------------------------------------------------------- writing


def start(run_dir: str | os.PathLike, seeds: Sequence[int], replay, classes: int,
          found: tuple[int, dict] | None, resume: bool, primary: bool,
          chunksize: int) -> ReplayFiles:
    """The run's ReplayFiles: fresh, or continuing checkpoint `found` (resume_point's).
    A resume with no checkpoint (killed before its first) starts the files again: what a
    killed run wrote is removed first. A fresh run whose replay was filled before its
    first tick (run.replay_from) begins its streams with the rows the ring holds."""
    import shutil

    from dreamerjax.run import checkpoint as ckpt

    if resume and found is None and primary:
        shutil.rmtree(Path(run_dir) / RUN_REPLAY, ignore_errors=True)
    ckpt.sync("dreamerjax_replay_files")
    meta = found[1].get(META_KEY) if found else None
    files = ReplayFiles(run_dir, seeds, pairs_of(replay), chunksize, classes, meta,
                        found[0] if found else None)
    if meta is None:  # a fresh run's replay may hold rows already (run.replay_from)
        count = _local_count(replay)
        files.rows = count - min(count, replay.capacity)  # those the ring holds: written
        files.add(replay)
    return files


class ReplayFiles:
    """The writers of one process's envs and the latent files of its seeds.

    run_dir, seeds: the run's; pairs: this process's (seed position, env) pairs
    (trainers.EnvPart); chunksize: rows per chunk (run.replay_chunksize); classes: the
    latents' classes (the stored stoch is one-hot over them, chunks.chunk_rows); resume:
    the `META_KEY` entry of the checkpoint resumed (None for a fresh run) and that
    checkpoint's index."""

    def __init__(self, run_dir: str | os.PathLike, seeds: Sequence[int], pairs, chunksize: int,
                 classes: int, resume: Mapping | None = None, resume_index: int | None = None):
        self.run_dir = Path(run_dir)
        self.seeds = tuple(int(s) for s in seeds)
        self.pairs = [(int(s), int(e)) for s, e in pairs]
        self.chunksize = int(chunksize)
        self.classes = int(classes)
        self.process = jax.process_index()
        streams = (resume or {}).get("streams", {})
        self.writers = {}
        self.rows = 0  # rows per env handed to the writers
        for s, e in self.pairs:
            directory = seed_dir(run_dir, self.seeds[s])
            directory.mkdir(parents=True, exist_ok=True)
            state = streams.get(_stream_key(self.seeds[s], e))
            if state is None:
                self.writers[s, e] = chunks.ChunkWriter(directory, self.chunksize)
            else:
                self.writers[s, e] = chunks.ChunkWriter.resume(directory, self.chunksize,
                                                               state)
        mine = (resume or {}).get("latents", {}).get(str(self.process), {})
        self.latents = {s: list(mine.get(str(self.seeds[s]), [])) for s in
                        {s for s, _ in self.pairs}}
        if resume is not None:
            self.rows = int(resume.get("rows", 0))
        if resume_index is not None or resume is not None:
            self._remove_after(resume_index)

    def _remove_after(self, index: int | None) -> None:
        """Latent files of this process newer than the checkpoint resumed (a run killed
        after writing them, before its checkpoint committed): the resumed run writes them
        again."""
        for s in self.latents:
            directory = _latents_dir(self.run_dir, self.seeds[s])
            if not directory.is_dir():
                continue
            for path in directory.glob(f"*-p{self.process}.npz*"):
                stem = path.name.split("-")[0]
                if stem.isdigit() and (index is None or int(stem) > index):
                    path.unlink(missing_ok=True)

    def add(self, replay) -> None:
        """Hand the rows the envs added since the last call to their writers (each full
        chunk is written once)."""
        count = _local_count(replay)
        n = count - self.rows
        if n <= 0:
            return
        if n > replay.capacity:
            raise ValueError(
                f"run.replay_capacity: {replay.capacity} rows per env is shorter than a "
                f"log interval's {n}: the replay files would miss rows; raise it to at "
                f"least {n} or lower run.eval_every_rows")
        got = _rows_of(replay, self.rows % replay.capacity, n)
        for key, writer in self.writers.items():
            writer.add(chunks.chunk_rows(got[key], self.classes))
        self.rows = count

    def checkpoint(self, replay, index: int) -> dict:
        """At checkpoint `index`: every writer's partial chunk written, the latents of the
        rows changed since the last checkpoint written (or a snapshot of them all), and
        this process's part of the meta (gathered with every process's: `meta`)."""
        self.add(replay)
        for writer in self.writers.values():
            writer.flush()
        latents = self._write_latents(replay, int(index))
        return {"streams": {_stream_key(self.seeds[s], e): w.state
                            for (s, e), w in self.writers.items()},
                "latents": {str(self.process): latents}, "rows": self.rows}

    def close(self) -> None:
        """The partial chunks written at the run's end (no checkpoint needs them)."""
        for writer in self.writers.values():
            writer.flush()

    def _latent_entries(self, replay, everything: bool) -> dict[int, dict[str, np.ndarray]]:
        """{seed position: latent entry} of this process's rows marked dirty (or, with
        everything, of every row the ring holds): env [M], row [M], deter, stoch."""
        count, cap = _local_count(replay), replay.capacity
        host = replay.memory == "host"
        by_seed: dict[int, dict[str, list]] = {}
        for index_sl, mask in _shards(replay.dirty):
            s0, e0 = index_sl[0].start or 0, index_sl[1].start or 0
            mask = np.asarray(mask)
            if everything:
                mask = np.broadcast_to(np.arange(cap) < count, mask.shape)
            s, e, slot = np.nonzero(mask)
            if not s.size:
                continue
            m, pad = s.size, _bucket(s.size) - s.size
            idx = [jnp.asarray(np.pad(x, (0, pad)).astype(np.int32)) for x in (s, e, slot)]
            values = {}
            for key in LATENT_KEYS:
                block = next(d for i, d in _shards(replay.data[key]) if i[:2] == index_sl[:2])
                values[key] = np.asarray(_gather(block, *idx, host))[:m]
            for seed_pos in np.unique(s):
                sel = s == seed_pos
                out = by_seed.setdefault(int(s0 + seed_pos), {k: [] for k in
                                                              ("env", "row", *LATENT_KEYS)})
                out["env"].append((e0 + e[sel]).astype(np.int32))
                out["row"].append(_held_row(slot[sel], count, cap).astype(np.int64))
                for key in LATENT_KEYS:
                    out[key].append(values[key][sel])
        return {s: {k: np.concatenate(v) for k, v in parts.items()}
                for s, parts in by_seed.items()}

    def _write_latents(self, replay, index: int) -> dict[str, list[str]]:
        """This process's latent file of checkpoint `index` per seed (none where no row
        changed): the rows marked dirty, or a snapshot of every held row once the listed
        files would outgrow one (the module's snapshot rule). Returns {seed: the files it needs}."""
        if replay.dirty is None:
            return {str(self.seeds[s]): [] for s in self.latents}
        count, cap = _local_count(replay), replay.capacity
        entries = self._latent_entries(replay, everything=False)
        row_bytes = 12 + sum(replay.data[k].dtype.itemsize * replay.data[k].shape[-1]
                             for k in LATENT_KEYS)
        envs = {s: sum(1 for q, _ in self.pairs if q == s) for s in self.latents}
        snapshot = None
        lists = {}
        for s in sorted(self.latents):
            entry, files = entries.get(s), self.latents[s]
            if entry is None:
                lists[str(self.seeds[s])] = list(files)
                continue
            directory = _latents_dir(self.run_dir, self.seeds[s])
            listed = sum((directory / f).stat().st_size for f in files
                         if (directory / f).exists())
            if listed + entry["row"].size * row_bytes > min(count, cap) * envs[s] * row_bytes:
                if snapshot is None:
                    snapshot = self._latent_entries(replay, everything=True)
                entry, files = snapshot[s], []
            name = _latent_name(index, self.process)
            _write_npz(directory / name, entry)
            self.latents[s] = files = [*files, name]
            lists[str(self.seeds[s])] = list(files)
        return lists


def clear_dirty(replay):
    """The replay with no row marked dirty (after a checkpoint saved their latents), each
    shard where it was."""
    if replay.dirty is None:
        return replay
    dirty = replay.dirty
    return replay.replace(dirty=jax.jit(jnp.zeros_like, out_shardings=dirty.sharding)(dirty))


def pairs_of(replay) -> list[tuple[int, int]]:
    """This process's (seed position, env) pairs: those of its shards of the replay."""
    out = []
    for index, data in _shards(replay.count):
        s0, e0 = index[0].start or 0, index[1].start or 0
        out += [(s0 + i, e0 + j) for i in range(data.shape[0]) for j in range(data.shape[1])]
    return sorted(out)


def _stream_key(seed: int, env: int) -> str:
    return f"{int(seed)}/{int(env)}"


def _write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """An .npz through a temporary file, fsync and rename (never a torn file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_latents(run_dir, seed: int, name: str) -> dict[str, np.ndarray]:
    path = _latents_dir(run_dir, seed) / name
    try:
        with np.load(path) as f:
            return {k: f[k] for k in ("env", "row", *LATENT_KEYS)}
    except FileNotFoundError:
        raise ReplayFilesError(f"{path}: missing (a latent file the checkpoint lists)"
                               ) from None
    except Exception as e:  # noqa: BLE001 - a damaged file, whatever numpy says of it
        raise ReplayFilesError(f"{path}: unreadable ({type(e).__name__}: {e})") from None


def gather_meta(part: dict) -> dict:
    """Every process's `ReplayFiles.checkpoint` part in one (process 0's meta): the
    streams and latent lists of all processes; the rows per env are the same on each."""
    if jax.process_count() == 1:
        return part
    from jax.experimental import multihost_utils

    from dreamerjax.run import distributed

    distributed.barrier("replay_files_meta")  # a collective's 30 s start when all are here
    text = json.dumps(part).encode()
    size = int(np.max(multihost_utils.process_allgather(np.int64(len(text)))))
    buf = np.zeros(size, np.uint8)
    buf[:len(text)] = np.frombuffer(text, np.uint8)
    every = multihost_utils.process_allgather(buf)
    out: dict[str, Any] = {"streams": {}, "latents": {}, "rows": part["rows"]}
    for row in np.asarray(every):
        got = json.loads(bytes(row).rstrip(b"\0").decode())
        out["streams"].update(got["streams"])
        out["latents"].update(got["latents"])
    return out


def referenced(metas: Sequence[Mapping]) -> dict[int, set[str]]:
    """{seed: latent file names} listed by the given checkpoints' metas."""
    out: dict[int, set[str]] = {}
    for meta in metas:
        for per_seed in meta.get(META_KEY, {}).get("latents", {}).values():
            for seed, names in per_seed.items():
                out.setdefault(int(seed), set()).update(names)
    return out


def remove_unreferenced(run_dir: str | os.PathLike, seeds: Sequence[int],
                        metas: Sequence[Mapping]) -> None:
    """Delete the latent files no kept checkpoint lists (process 0, after a save)."""
    keep = referenced(metas)
    for seed in seeds:
        directory = _latents_dir(run_dir, seed)
        if not directory.is_dir():
            continue
        for path in directory.glob("*.npz"):
            if path.name not in keep.get(int(seed), set()):
                path.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- reading


def _stream_tail(directory: Path, state: Mapping, need: int, env: int,
                 ends: frozenset = frozenset()) -> list:
    """The chunk names holding the last `need` rows of the stream whose writer state is
    `state` (its last chunk names state["uuid"] as successor), oldest first. Chunks after
    it (a later, lost part of the run) are not read. ReplayFilesError naming the chunk
    that is missing by what its name holds (`*-{uuid}-{succ}-*.npz`, the uuid where its
    predecessor names it); ends: every stream's state["uuid"] in the directory."""
    by_succ, uuids = {}, set()
    for path in directory.glob("*.npz"):
        try:
            name = chunks.ChunkName.parse(path.name)
        except ValueError:
            continue
        by_succ[name.succ] = name
        uuids.add(name.uuid)
    out, rows, succ = [], 0, state["uuid"]
    while rows < need:
        name = by_succ.get(succ)
        if name is None:
            # its own uuid: what a predecessor names as a successor not on disk
            dangling = [n.succ for n in by_succ.values()
                        if n.succ not in uuids and n.succ not in ends | {state["uuid"]}]
            pattern = (f"*-{dangling[0]}-{succ}-*.npz" if len(dangling) == 1
                       else f"*-{succ}-*.npz")
            raise ReplayFilesError(
                f"{directory}: chunk {pattern} of env {env}'s stream is missing; "
                f"{need - rows} of the {need} rows the replay holds are in no file")
        out.insert(0, name)
        rows += name.length
        succ = name.uuid
    return out


def seed_missing(run_dir: str | os.PathLike, seed: int) -> str:
    """The line of a seed folder of the run's replay that is gone."""
    return (f"{seed_dir(run_dir, seed)}: missing (seed {int(seed)}'s replay: its chunk files, "
            "whose rows no checkpoint holds)")


def _tail_chunks(run_dir, seed: int, meta: Mapping, env: int, need: int
                 ) -> tuple[Path, list]:
    """(seed's folder, the chunk names of env's last `need` rows) of the checkpoint whose
    META_KEY entry is meta. ReplayFilesError naming the seed folder when it is gone, the
    env when the checkpoint has no stream of it, the chunk when one is missing."""
    directory = seed_dir(run_dir, seed)
    streams = meta.get("streams", {})
    key = _stream_key(seed, env)
    if key not in streams:
        raise ReplayFilesError(f"{directory}: the checkpoint has no stream of env {env}")
    if need <= 0:
        return directory, []
    if not directory.is_dir():
        raise ReplayFilesError(seed_missing(run_dir, seed))
    ends = frozenset(v["uuid"] for k, v in streams.items() if k.split("/")[0] == str(seed))
    return directory, _stream_tail(directory, streams[key], need, env, ends)


def _read_chunks(directory: Path, names: Sequence) -> list[dict[str, np.ndarray]]:
    try:
        return [chunks.read_chunk(directory, name) for name in names]
    except chunks.ReplayDirError as err:
        raise ReplayFilesError(str(err)) from None


def check(run_dir: str | os.PathLike, seeds: Sequence[int], meta: Mapping,
          capacity: int) -> None:
    """Every file `ring` reads for the checkpoint whose META_KEY entry is meta (each env's
    newest `capacity` rows, the latent files), read whole, with numpy alone: a resume
    calls it before anything compiles. ReplayFilesError naming the first seed folder,
    chunk or latent file that is missing or damaged, as `ring` would."""
    need = min(int(meta["rows"]), int(capacity))
    for seed in (int(s) for s in seeds):
        envs = sorted(int(k.split("/")[1]) for k in meta.get("streams", {})
                      if k.split("/")[0] == str(seed))
        for env in envs:
            _read_chunks(*_tail_chunks(run_dir, seed, meta, env, need))
        for per_process in meta.get("latents", {}).values():
            for file in per_process.get(str(seed), []):
                _read_latents(run_dir, seed, file)


def ring(run_dir: str | os.PathLike, seeds: Sequence[int], meta: Mapping, target) -> dict:
    """The replay's rows (`data`) at a checkpoint, rebuilt from the run's files: target is
    the replay's abstract state (shapes, dtypes and shardings of `data`); meta the
    checkpoint's META_KEY entry. Each process builds its own shards. Raises
    ReplayFilesError naming the first chunk or latent file that is missing or damaged."""
    rows = int(meta["rows"])
    leaves, tree = jax.tree.flatten(target.data)
    seeds_n, envs, cap = leaves[0].shape[:3]
    lo = max(0, rows - cap)
    mine = set()  # the (seed, env) pairs this process holds
    for index in leaves[0].sharding.addressable_devices_indices_map(leaves[0].shape).values():
        for s in range(*index[0].indices(seeds_n)):
            for e in range(*index[1].indices(envs)):
                mine.add((s, e))
    blocks = [np.zeros(leaf.shape, leaf.dtype) for leaf in leaves]
    spec = jax.tree.unflatten(tree, [(leaf.shape[3:], leaf.dtype) for leaf in leaves])
    slots = np.arange(lo, rows) % cap
    for s, e in sorted(mine):
        directory, names = _tail_chunks(run_dir, int(seeds[s]), meta, e, rows - lo)
        if not names:
            continue
        parts = _read_chunks(directory, names)
        stored = {k: np.concatenate([p[k] for p in parts], 0)[-(rows - lo):]
                  for k in parts[0]}
        got = chunks.schema_rows(
            stored, spec["obs"], spec["action"], spec["deter"][0][-1],
            spec["stoch"][0][-1], where=str(directory / names[0].filename))
        for block, x in zip(blocks, jax.tree.leaves(got), strict=True):
            block[s, e, slots] = x
    by_key = dict(zip([jax.tree_util.keystr(p) for p, _ in
                       jax.tree_util.tree_leaves_with_path(target.data)], blocks, strict=True))
    for s in sorted({s for s, _ in mine}):
        for per_process in meta.get("latents", {}).values():
            for file in per_process.get(str(seeds[s]), []):
                entry = _read_latents(run_dir, seeds[s], file)
                held = (entry["row"] >= lo) & (entry["row"] < rows)
                held &= np.array([(s, int(x)) in mine for x in entry["env"]], bool)
                env, row = entry["env"][held], entry["row"][held]
                for key in LATENT_KEYS:
                    by_key[f"['{key}']"][s, env, row % cap] = entry[key][held]
    out = [jax.make_array_from_callback(leaf.shape, leaf.sharding,
                                        lambda index, b=block: b[index])
           for leaf, block in zip(leaves, blocks, strict=True)]
    return jax.tree.unflatten(tree, out)
