"""A replay as a directory of chunk files, in the reference's own format (e3f0224).

The format (embodied/core/chunk.py and embodied/core/replay.py @e3f0224):

* A chunk holds consecutive rows of one stream, the rows one env (one `worker` of the
  reference's driver) produced in order. It is one file `{time}-{uuid}-{succ}-{length}.npz`
  (Chunk.filename, chunk.py:30-33): `time` is when the chunk was begun,
  `%Y%m%dT%H%M%S` + `F` + six digits of microseconds (elements.timestamp(millis=True),
  chunk.py:14); `uuid` the chunk's 16-byte id and `succ` the id of the chunk that follows
  it in its stream, both in elements.UUID's text form, 22 base-62 digits (uuid.py:57-67);
  `length` the rows held.
* The file is np.savez_compressed of the first `length` rows of every key (chunk.py:64-74).
* A chunk is written when it is full, and a partial chunk when the replay is saved: save()
  completes every stream's current chunk that holds rows (replay.py:294-309), which gives
  it a successor (a fresh chunk, its uuid in `succ`) and writes it; the stream's next rows
  go to that successor. So every chunk on disk names a successor, and the last chunk of a
  stream names one that is not (yet) on disk. Load (replay.py:311-359) follows the `succ`
  ids to join the chunks of a stream; it does not need a stream's chunks to be full.
* Every row carries `stepid`, uint8 [20]: the chunk's uuid bytes and the row's index in
  the chunk, 4 bytes big-endian (replay.py:90-91).
* The keys of a row are the env's observation keys (reward, is_first, is_last,
  is_terminal among them), the action keys, and with replay_context the policy's latent
  entries under their flattened names: 'dyn/deter' float32 [deter] and 'dyn/stoch'
  float32 one-hot [stoch, classes] (agent.py:94-97, 132-134, rssm.py:40-43 @e3f0224;
  bfloat16 outputs are stored as float32, embodied/jax/agent.py:399-403). 'log/' keys
  are dropped (replay.py:78).
* 29eb964 writes the same files (embodied/replay/chunk.py and replay.py @29eb964, its
  save / load at replay.py:319-387 are e3f0224's); its rows also hold the driver's
  'reset' flag (embodied/core/driver.py:72-74 @29eb964) and the latents as 'deter'
  float32 [deter] and 'stoch' int32 [stoch] (agent.py:103-113, 142-144 @29eb964).
  `read_streams` reads both; `chunk_format` tells them apart; `schema_rows` maps either
  to dreamerjax's replay rows.

dreamerjax writes a stream with one ChunkWriter per env. Files are written under a
temporary name (not ending in .npz, so no reader sees them) and renamed when complete.
"""

from __future__ import annotations

import dataclasses
import io
import os
import string
import uuid as uuidlib
import zipfile
import zlib
from datetime import datetime
from pathlib import Path

import numpy as np

from dreamerjax.config.defaults import RunConfig

BASE62 = string.digits + string.ascii_letters
UUID_CHARS = 22  # elements.UUID's text form is padded to 22 digits (uuid.py:65-66)
NO_SUCC = "0" * UUID_CHARS  # elements.UUID(0): a chunk not (yet) completed
STEPID = "stepid"
LATENTS_E3F0224 = ("dyn/deter", "dyn/stoch")
LATENTS_29EB964 = ("deter", "stoch")
FLAGS = ("is_first", "is_last", "is_terminal")
CHUNKSIZE = RunConfig.replay_chunksize  # the reference's replay.chunksize's default


class ReplayDirError(ValueError):
    """A directory that is not a replay, or one whose chunks do not fit together; the
    message is one line and names the directory or the chunk file."""


# ------------------------------------------------------------------------------- names


def uuid_text(value: bytes) -> str:
    """16 bytes as elements.UUID's text: base 62, 22 digits (uuid.py:57-67 @e3f0224)."""
    integer = int.from_bytes(value, "big")
    chars = []
    while integer:
        integer, digit = divmod(integer, 62)
        chars.append(BASE62[digit])
    return "".join(reversed(chars)).rjust(UUID_CHARS, "0")


def uuid_bytes(text: str) -> bytes:
    """The 16 bytes of a uuid's text form (uuid.py:38-43 @e3f0224)."""
    integer = 0
    for char in text:
        digit = BASE62.find(char)
        if digit < 0:
            raise ValueError(f"{text!r} is not a base-62 uuid")
        integer = integer * 62 + digit
    if integer >= 1 << 128:
        raise ValueError(f"{text!r} is longer than 16 bytes")
    return integer.to_bytes(16, "big")


def timestamp(now: datetime | None = None) -> str:
    """elements.timestamp(millis=True): `%Y%m%dT%H%M%S` and `F` + microseconds."""
    now = datetime.now() if now is None else now
    return now.strftime("%Y%m%dT%H%M%S") + f"F{now.microsecond:06d}"


@dataclasses.dataclass(frozen=True, order=True)
class ChunkName:
    """The parts of a chunk's file name, `{time}-{uuid}-{succ}-{length}.npz`."""

    time: str
    uuid: str
    succ: str
    length: int

    @property
    def filename(self) -> str:
        return f"{self.time}-{self.uuid}-{self.succ}-{self.length}.npz"

    @classmethod
    def parse(cls, filename: str) -> ChunkName:
        """The name's parts; ValueError when it is not a chunk's name."""
        stem = filename[:-4] if filename.endswith(".npz") else filename
        parts = stem.split("-")
        if len(parts) != 4 or not parts[3].isdigit():
            raise ValueError(f"{filename}: not a chunk name {{time}}-{{uuid}}-{{succ}}-"
                             "{length}.npz")
        time, uuid, succ, length = parts
        uuid_bytes(uuid), uuid_bytes(succ)  # both must be uuids
        return cls(time, uuid, succ, int(length))


def stepids(uuid: bytes, start: int, count: int) -> np.ndarray:
    """The `stepid` of rows start .. start + count - 1 of a chunk: uint8 [count, 20], the
    chunk's uuid and the row's index (4 bytes big-endian), replay.py:90-91 @e3f0224."""
    index = np.arange(start, start + count, dtype=">u4").view(np.uint8).reshape(count, 4)
    head = np.broadcast_to(np.frombuffer(uuid, np.uint8), (count, 16))
    return np.concatenate([head, index], axis=1)


def write_chunk(directory: str | os.PathLike, name: ChunkName, rows: dict) -> Path:
    """rows (key -> [length, ...]) as the chunk file `name` in directory: written under a
    temporary name and renamed, so a reader sees a whole file or none (chunk.py:64-74)."""
    path = Path(directory) / name.filename
    with io.BytesIO() as buffer:
        np.savez_compressed(buffer, **rows)
        payload = buffer.getvalue()
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------- writing


class ChunkWriter:
    """Writes one stream (one env's rows, in order) as chunk files of `chunksize` rows.

    add(rows) takes rows with a leading time axis, any number at a time, and writes every
    chunk that became full, once. flush() writes the rows of the current chunk if it holds
    any, as the reference's save does: that chunk is completed with a successor, and the
    rows that follow begin the successor (replay.py:294-309, 361-370 @e3f0224).

    `state` is what a checkpoint keeps to continue the stream after a restart, JSON-able:
    {"uuid": the text uuid of the chunk that the next row goes to (the `succ` named by the
    last chunk written), "time": when that chunk was begun, "rows": rows in the stream's
    files, "chunks": files written}. It does not cover rows added since the last flush
    (`pending` of them): take it after flush(), as the reference saves its chunks when it
    saves a checkpoint. `resume` continues from such a state.
    """

    def __init__(self, directory: str | os.PathLike, chunksize: int):
        if int(chunksize) < 1:
            raise ValueError(f"replay.chunksize must be >= 1, got {chunksize}")
        self.directory = Path(directory)
        self.chunksize = int(chunksize)
        self._uuid = uuidlib.uuid4().bytes
        self._time = timestamp()
        self._rows_written = 0
        self._chunks_written = 0
        self._buffer: list[dict[str, np.ndarray]] = []  # blocks of the current chunk
        self._pending = 0
        self._spec: dict[str, tuple[tuple[int, ...], np.dtype]] | None = None
        self.removed: list[str] = []  # chunk files `resume` removed

    @classmethod
    def resume(cls, directory: str | os.PathLike, chunksize: int, state: dict
               ) -> ChunkWriter:
        """A writer that continues the stream where `state` (a flushed writer's `state`)
        left it. Chunks that a later, lost part of the same run wrote after that state
        (the chunk named by state["uuid"] and its successors) are removed first: the
        resumed run writes those rows again, and a stream holds each row once."""
        writer = cls(directory, chunksize)
        writer._uuid = uuid_bytes(state["uuid"])
        writer._time = str(state["time"])
        writer._rows_written = int(state["rows"])
        writer._chunks_written = int(state["chunks"])
        writer.removed = discard_chain(directory, state["uuid"])
        return writer

    @property
    def state(self) -> dict:
        return {"uuid": uuid_text(self._uuid), "time": self._time,
                "rows": self._rows_written, "chunks": self._chunks_written}

    @property
    def pending(self) -> int:
        """Rows added but not yet in a file."""
        return self._pending

    @property
    def rows(self) -> int:
        """Rows added over the stream's life (in files and pending)."""
        return self._rows_written + self._pending

    def add(self, rows: dict) -> list[Path]:
        """Append rows (key -> [T, ...], the same T for every key, the reference's key
        names, no 'stepid': the writer makes it). Returns the files written."""
        rows = {k: np.asarray(v) for k, v in rows.items() if not k.startswith("log/")}
        count = self._check(rows)
        written = []
        start = 0
        while start < count:
            take = min(count - start, self.chunksize - self._pending)
            block = {k: v[start:start + take] for k, v in rows.items()}
            block[STEPID] = stepids(self._uuid, self._pending, take)
            self._buffer.append(block)
            self._pending += take
            start += take
            if self._pending == self.chunksize:
                written.append(self._complete())
        return written

    def flush(self) -> Path | None:
        """Write the current chunk if it holds rows (replay.py:298-301): it is completed
        with a successor and the next rows begin that successor. Returns the file."""
        return self._complete() if self._pending else None

    def _check(self, rows: dict) -> int:
        if STEPID in rows:
            raise ValueError("rows carry 'stepid'; the chunk writer makes it from the chunk")
        if not rows:
            raise ValueError("no rows: an empty mapping")
        counts = {k: (v.shape[0] if v.ndim else None) for k, v in rows.items()}
        if len(set(counts.values())) != 1 or None in counts.values():
            raise ValueError(f"rows need one leading time axis of the same length: {counts}")
        spec = {k: (v.shape[1:], v.dtype) for k, v in rows.items()}
        if self._spec is None:
            self._spec = spec
        elif spec != self._spec:
            raise ValueError(f"rows: {_mismatch(spec, self._spec)} as in this stream's "
                             "earlier rows")
        return next(iter(counts.values()))

    def _complete(self) -> Path:
        succ = uuidlib.uuid4().bytes
        data = {k: np.concatenate([b[k] for b in self._buffer], 0) for k in self._buffer[0]}
        name = ChunkName(self._time, uuid_text(self._uuid), uuid_text(succ), self._pending)
        path = write_chunk(self.directory, name, data)
        self._rows_written += self._pending
        self._chunks_written += 1
        self._buffer, self._pending = [], 0
        self._uuid, self._time = succ, timestamp()
        return path


def _mismatch(spec: dict, first: dict) -> str:
    """The first key (sorted) whose (shape, dtype) differs between two specs, in words:
    "key 'vector' is float32 (3,) (not float32 (4,))", with `first`'s in the brackets."""
    key = next(k for k in sorted(set(spec) | set(first)) if spec.get(k) != first.get(k))
    return f"key {key!r} is {_describe(spec.get(key))} (not {_describe(first.get(key))})"


def _describe(spec) -> str:
    if spec is None:
        return "absent"
    shape, dtype = spec
    return f"{np.dtype(dtype).name} {tuple(shape)}"


def discard_chain(directory: str | os.PathLike, uuid: str) -> list[str]:
    """Remove the chunk `uuid` and the chunks that follow it by `succ` from directory;
    returns the names removed (none when no such chunk is there)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    by_uuid = {}
    for path in directory.glob("*.npz"):
        try:
            name = ChunkName.parse(path.name)
        except ValueError:
            continue
        by_uuid[uuid_bytes(name.uuid)] = name
    removed, key = [], uuid_bytes(uuid)
    while key in by_uuid:
        name = by_uuid.pop(key)
        (directory / name.filename).unlink()
        removed.append(name.filename)
        key = uuid_bytes(name.succ)
    return removed


# ------------------------------------------------------------------------------- reading


@dataclasses.dataclass(frozen=True)
class StreamFiles:
    """One stream's chunks in order (names), its rows, and `succ`: the uuid its next
    chunk would have (the last chunk's successor, not on disk)."""

    names: tuple[ChunkName, ...]
    rows: int
    succ: str


def scan(directory: str | os.PathLike) -> list[StreamFiles]:
    """The streams of a replay directory from the chunk names alone, joined by their
    `succ` ids as the reference's load joins them (replay.py:311-359 @e3f0224), in the
    order of their first chunks' names (time, then uuid). ReplayDirError, one line, for a
    directory that holds no chunk, a file name that is not a chunk's, two chunks with one
    uuid, two chunks naming one successor, or a loop."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ReplayDirError(f"{directory}: no such replay directory")
    files = sorted(p.name for p in directory.glob("*.npz"))
    if not files:
        raise ReplayDirError(
            f"{directory}: not a replay directory (no chunk files "
            "{time}-{uuid}-{succ}-{length}.npz)")
    by_uuid: dict[bytes, ChunkName] = {}
    for filename in files:
        try:
            name = ChunkName.parse(filename)
        except ValueError as e:
            raise ReplayDirError(f"{directory}/{e}") from None
        key = uuid_bytes(name.uuid)
        if key in by_uuid:
            raise ReplayDirError(f"{directory}: chunks {by_uuid[key].filename} and "
                                 f"{filename} have the same uuid")
        by_uuid[key] = name
    pred: dict[bytes, ChunkName] = {}
    for name in by_uuid.values():
        succ = uuid_bytes(name.succ)
        if succ in pred:
            raise ReplayDirError(f"{directory}: chunks {pred[succ].filename} and "
                                 f"{name.filename} name the same successor")
        pred[succ] = name
    heads = sorted((n for k, n in by_uuid.items() if k not in pred), key=lambda n: n.filename)
    streams, seen = [], set()
    for head in heads:
        names, name = [], head
        while True:
            names.append(name)
            seen.add(uuid_bytes(name.uuid))
            nxt = by_uuid.get(uuid_bytes(name.succ))
            if nxt is None:
                break
            name = nxt
        streams.append(StreamFiles(tuple(names), sum(n.length for n in names), name.succ))
    if len(seen) < len(by_uuid):
        loop = min(n.filename for k, n in by_uuid.items() if k not in seen)
        raise ReplayDirError(f"{directory}: chunk {loop} is in a loop of successors")
    return streams


def read_chunk(directory: str | os.PathLike, name: ChunkName, keys=None
               ) -> dict[str, np.ndarray]:
    """One chunk's arrays (only `keys` of them, those it has, when given: the others are
    not decompressed); ReplayDirError naming the file when it cannot be read or its arrays
    do not hold the `length` rows its name says."""
    path = Path(directory) / name.filename
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files if keys is None or k in keys}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError, zlib.error) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ReplayDirError(f"{path}: damaged chunk ({reason})") from None
    if not data and keys is None:
        raise ReplayDirError(f"{path}: damaged chunk (no arrays)")
    for key, value in data.items():
        if value.ndim == 0 or value.shape[0] != name.length:
            raise ReplayDirError(f"{path}: damaged chunk ({key!r} holds "
                                 f"{value.shape[:1]} rows, the name says {name.length})")
    return data


def stream_chunks(directory: str | os.PathLike, stream: StreamFiles):
    """A stream's chunks in order, each read whole (key -> [length, ...]), one at a time.
    ReplayDirError naming the chunk when a chunk is damaged, when its keys, shapes or
    dtypes differ from the stream's first chunk, or when the stream begins inside an
    episode (its first row is not is_first): the chunk that held the rows before it is
    missing."""
    first = None
    for name in stream.names:
        data = read_chunk(directory, name)
        spec = {k: (v.shape[1:], v.dtype) for k, v in data.items()}
        if first is None:
            first = spec
            if "is_first" in data and len(data["is_first"]) and not data["is_first"][0]:
                raise ReplayDirError(
                    f"{Path(directory) / name.filename}: its stream begins inside an "
                    "episode; the chunk before it is missing")
        elif spec != first:
            raise ReplayDirError(f"{Path(directory) / name.filename}: {_mismatch(spec, first)}"
                                 f" as in the stream's first chunk {stream.names[0].filename}")
        yield data


def read_stream(directory: str | os.PathLike, stream: StreamFiles) -> dict[str, np.ndarray]:
    """A stream's rows in order (key -> [rows, ...]); ReplayDirError as stream_chunks."""
    parts = list(stream_chunks(directory, stream))
    return {k: np.concatenate([p[k] for p in parts], 0) for k in parts[0]}


def read_streams(directory: str | os.PathLike) -> list[dict[str, np.ndarray]]:
    """Every stream's rows in order (key -> [rows, ...]), streams in `scan`'s order; every
    stream has the same keys, shapes and dtypes. Reads the e3f0224 and the 29eb964
    formats (the files are the same; `chunk_format` tells them apart by their keys)."""
    streams = scan(directory)
    out = [read_stream(directory, s) for s in streams]
    spec0 = {k: (v.shape[1:], v.dtype) for k, v in out[0].items()}
    for stream, rows in zip(streams[1:], out[1:], strict=True):
        spec = {k: (v.shape[1:], v.dtype) for k, v in rows.items()}
        if spec != spec0:
            raise ReplayDirError(
                f"{Path(directory) / stream.names[0].filename}: {_mismatch(spec, spec0)} as in "
                f"the first stream's {streams[0].names[0].filename}")
    return out


def chunk_format(keys) -> str:
    """Which reference wrote rows with these keys: "29eb964" (the driver's 'reset' flag
    or the latents as 'deter' / 'stoch') or "e3f0224"."""
    keys = set(keys)
    if "reset" in keys or set(LATENTS_29EB964) <= keys:
        return "29eb964"
    return "e3f0224"


# ------------------------------------------------------------------------------- rows


def chunk_rows(rows: dict, classes: int | None = None) -> dict[str, np.ndarray]:
    """dreamerjax replay rows (data/schema.py: obs {name: [T, ...]}, action, reward, the
    flags, deter f32 [T, D], stoch int32 [T, S]) as the reference e3f0224 stores them:
    the observation keys at the top level, and with `classes` (replay_context > 0) the
    latents as 'dyn/deter' f32 [T, D] and 'dyn/stoch' one-hot f32 [T, S, classes]; None
    leaves the latents out (replay_context 0 stores none, agent.py:132-134)."""
    obs = rows["obs"]
    if not isinstance(obs, dict):
        raise ValueError("rows['obs'] must be a dict of observation keys")
    out = {k: np.asarray(v) for k, v in obs.items()}
    for key in ("action", "reward", *FLAGS):
        out[key] = np.asarray(rows[key])
    if classes:
        out["dyn/deter"] = np.asarray(rows["deter"], np.float32)
        stoch = np.asarray(rows["stoch"])
        out["dyn/stoch"] = (stoch[..., None] == np.arange(classes)).astype(np.float32)
    return out


def schema_rows(rows: dict, obs: dict, action: tuple[tuple[int, ...], np.dtype],
                deter: int, stoch: int, where: str = "replay") -> dict:
    """A stream read from chunks (either format) as dreamerjax replay rows.

    obs: {name: (shape, dtype)} the config's observation keys (Spaces.obs_dict());
    action: (shape, dtype) of the action row (int32 () or float32 (A,)). The stored
    latents are kept where their sizes are the config's (deter, stoch) and are zeros (the
    initial state) otherwise. ValueError, one line naming `where` and the first key that is
    missing or whose shape or dtype differs from the config's."""
    def need(key, shape, dtype):
        if key not in rows:
            raise ValueError(f"{where}: no {key!r} rows; the config needs {key!r} "
                             f"{np.dtype(dtype).name} {tuple(shape)}")
        value = rows[key]
        if value.shape[1:] != tuple(shape) or not _fits(value.dtype, np.dtype(dtype)):
            raise ValueError(f"{where}: {key!r} is {value.dtype.name} {value.shape[1:]}, the "
                             f"config needs {np.dtype(dtype).name} {tuple(shape)}")
        return value.astype(dtype, copy=False)

    out = {"obs": {k: need(k, s, d) for k, (s, d) in obs.items()}}
    out["action"] = need("action", *action)
    out["reward"] = need("reward", (), np.float32)
    for flag in FLAGS:
        out[flag] = need(flag, (), np.bool_)
    count = out["reward"].shape[0]
    out["deter"] = np.zeros((count, deter), np.float32)
    out["stoch"] = np.zeros((count, stoch), np.int32)
    if rows.get("dyn/deter", np.zeros((0, 0))).shape[1:] == (deter,) and (
            rows.get("dyn/stoch", np.zeros((0, 0))).shape[1:2] == (stoch,)):
        out["deter"] = rows["dyn/deter"].astype(np.float32)
        out["stoch"] = np.argmax(rows["dyn/stoch"], -1).astype(np.int32)
    elif rows.get("deter", np.zeros((0, 0))).shape[1:] == (deter,) and (
            rows.get("stoch", np.zeros((0, 0))).shape[1:] == (stoch,)):
        out["deter"] = rows["deter"].astype(np.float32)
        out["stoch"] = rows["stoch"].astype(np.int32)
    return out


def _fits(stored: np.dtype, wanted: np.dtype) -> bool:
    """Whether stored values convert to the config's dtype without loss of kind: the same
    dtype, or a float / int stored at another width (the reference's envs give float64
    rewards or int64 actions on some suites)."""
    if stored == wanted:
        return True
    return stored.kind == wanted.kind and stored.kind in "fiu" or (
        stored.kind in "iu" and wanted.kind in "iu")
