"""Checkpoints of the training state with orbax: run_dir/checkpoints/<index>/{state,meta}.

`state` is the driver's SeedState pytree less the replay's rows (every seed; packed,
below; the rows are the run's replay files, run/replay_files.py); `meta` is a
JSON dict (config, seeds, rows, updates, log index, the byte offsets of records.jsonl /
episodes.jsonl at this log point, callback states, wall time). orbax writes
<index>.orbax-checkpoint-tmp first and renames it to <index> when complete, so an
interrupted save never leaves a directory that `latest` would pick; save() removes
temporary directories left by a failed or killed save. The last `keep` checkpoints are
kept (run.checkpoint_keep, KEEP by default; 0 keeps every one). Nothing is written outside
run_dir/checkpoints.

What we write is checked as well as orbax's own commit markers: after orbax commits a
checkpoint, save() writes MANIFEST (every file's size and sha256, through a temporary file
and a rename) into it; `latest_good` verifies the manifest and orbax's metadata before a
resume, skips (with a one-line warning) a checkpoint that was truncated or changed on disk,
and `set_aside` moves such a checkpoint to run_dir/damaged/ rather than deleting it. The
saved meta says a manifest follows, so a checkpoint whose save was killed between orbax's
commit and the manifest counts as damaged too; one written before manifests existed is
checked by orbax alone.

The state item is packed: the leaves smaller than PACK_BELOW are saved as one flat array
per dtype (`packed_float32`, ...) and each larger leaf as its own array (`leaf_<i>`), with
the layout (every leaf's key path, array, offset, shape and dtype) in the meta: orbax's
cost is per array, and a state has ~900 mostly small ones (docs/reliability.md gives the
times). A checkpoint written one array per leaf (before
the layout existed, or by a multi-process run, whose shards orbax writes from each
process) has no layout and is restored as it was written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from dreamerjax.config.keys import RESUMABLE_FIELDS, steps_may_grow
from dreamerjax.run.records import CONFIG_FILE, flatten, inf_as_text, to_jsonable

CHECKPOINT_DIR = "checkpoints"
KEEP = 2  # run.checkpoint_keep's default
MANIFEST = "MANIFEST.dreamerjax.json"  # inside <index>/, next to orbax's items
MANIFEST_KEY = "_manifest"  # in the saved meta: a MANIFEST follows (read_meta drops it)
LAYOUT_KEY = "_layout"  # in the saved meta: the packed state's layout (read_meta drops it)
PACK_BELOW = 1 << 20  # bytes: smaller leaves are packed, larger ones saved as they are
DAMAGED_DIR = "damaged"  # run_dir/damaged/<index>-<time>: checkpoints set aside on resume


def _ocp():
    import orbax.checkpoint as ocp

    return ocp


def _manager(run_dir: str | os.PathLike, *, read_only: bool = False, keep: int = KEEP):
    ocp = _ocp()
    directory = (Path(run_dir) / CHECKPOINT_DIR).absolute()
    if read_only and not directory.is_dir():
        return None
    # Readers open the directory without create; orbax's read_only mode only adds warnings.
    options = ocp.CheckpointManagerOptions(
        max_to_keep=int(keep) or None, enable_async_checkpointing=False,
        create=not read_only)
    return ocp.CheckpointManager(directory, options=options, item_names=("state", "meta"))


def _remove_partial(run_dir: str | os.PathLike, settle_s: float = 0.0) -> None:
    """Delete unfinished checkpoint directories (<index>.orbax-checkpoint-tmp...).

    Only this run writes under run_dir/checkpoints, so any temporary directory there is a
    leftover. After a failed save, tensorstore may still finish writes already issued;
    settle_s keeps removing until the directory stays gone that long.
    """
    from orbax.checkpoint._src.path.atomicity_types import TMP_DIR_SUFFIX

    directory = Path(run_dir) / CHECKPOINT_DIR
    deadline = time.monotonic() + 10 * settle_s
    while True:
        for path in directory.glob(f"*{TMP_DIR_SUFFIX}*"):
            shutil.rmtree(path, ignore_errors=True)
        if settle_s <= 0 or time.monotonic() > deadline:
            return
        time.sleep(settle_s)
        if not any(directory.glob(f"*{TMP_DIR_SUFFIX}*")):
            return


def _join_until(thread: threading.Thread, deadline: float) -> None:
    """Join a thread until the deadline. threading.enumerate() also lists threads whose
    start() has not reached them yet, and joining one of those raises instead of waiting
    (under load it did, and hid the save's own error): wait for it to start first."""
    while time.monotonic() < deadline:
        try:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:  # "cannot join thread before it is started"
            time.sleep(0.01)


def save(run_dir: str | os.PathLike, index: int, state: Any, meta: Mapping,
         keep: int = KEEP) -> Path:
    """Write checkpoint `index` (state pytree + JSON meta); keep the last `keep` (0: all).

    Returns the checkpoint's directory. Raises if `index` already exists. meta is made
    strict JSON (non-finite floats -> null, numpy scalars -> numbers).
    """
    ocp = _ocp()
    index = int(index)
    packed = _pack(state)
    extra = {MANIFEST_KEY: True}
    if packed is not None:
        state, extra[LAYOUT_KEY] = packed
    meta = dict(meta) | extra
    if "config" in meta:  # an infinite setting kept as text, not JSON's null
        meta["config"] = inf_as_text(meta["config"])
    meta = to_jsonable(meta)
    target = Path(run_dir) / CHECKPOINT_DIR / str(index)
    if target.exists():
        raise FileExistsError(f"checkpoint {target} already exists")
    if jax.process_index() == 0:  # in a multi-host run, one process tidies the directory
        _remove_partial(run_dir)
    sync("dreamerjax_checkpoint_tidy")
    manager = _manager(run_dir, keep=keep)
    threads = set(threading.enumerate())
    try:
        try:
            manager.save(index, args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True)
            manager.wait_until_finished()
        finally:
            manager.close()  # waits for writes still in flight
    except BaseException:
        # When one item fails, orbax's threads may still be writing the others: let them
        # end before tidying (and before the interpreter exits under them, which makes
        # them print tracebacks after the run's one-line error).
        deadline = time.monotonic() + 20  # idle pool workers never end: bounded
        for thread in set(threading.enumerate()) - threads:
            _join_until(thread, deadline)
        _remove_partial(run_dir, settle_s=0.2)
        raise
    sync("dreamerjax_checkpoint_saved")
    if not target.is_dir():
        raise RuntimeError(f"orbax did not write {target}")
    if jax.process_index() == 0:
        write_manifest(target)
    sync("dreamerjax_checkpoint_manifest")
    return target


def _file_digests(directory: Path, sync_files: bool = False) -> dict[str, dict]:
    """{relative path: {"bytes", "sha256"}} of every file under directory except the
    manifest; sync_files also fsyncs each file (orbax commits without it)."""
    out = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.name.startswith(MANIFEST):
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
            if sync_files:
                os.fsync(f.fileno())
        out[path.relative_to(directory).as_posix()] = {
            "bytes": path.stat().st_size, "sha256": digest.hexdigest()}
    return out


def write_manifest(directory: str | os.PathLike) -> Path:
    """MANIFEST of a committed checkpoint directory (atomic: temporary file + rename)."""
    directory = Path(directory)
    path = directory / MANIFEST
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"version": 1, "files": _file_digests(directory, sync_files=True)}, f,
                  indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself
    finally:
        os.close(fd)
    return path


def verify(run_dir: str | os.PathLike, index: int) -> str | None:
    """None when checkpoint `index` is whole, else what is wrong with it (one phrase): a
    file of its manifest missing, of another size or sha256; orbax's metadata unreadable;
    the manifest its meta promises missing (a save killed before it was written)."""
    directory = Path(run_dir) / CHECKPOINT_DIR / str(int(index))
    if not directory.is_dir():
        return "missing"
    manifest = directory / MANIFEST
    if manifest.exists():
        try:
            want = json.loads(manifest.read_text())["files"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            return f"unreadable {MANIFEST} ({e})"
        have = _file_digests(directory)
        for name, entry in sorted(want.items()):
            got = have.get(name)
            if got is None:
                return f"{name} is missing"
            if got["bytes"] != entry["bytes"]:
                return f"{name} has {got['bytes']} bytes, {entry['bytes']} were written"
            if got["sha256"] != entry["sha256"]:
                return f"{name} does not match its sha256"
    try:
        raw = _read_raw_meta(run_dir, index)
    except Exception as e:  # noqa: BLE001 - any failure to read means damaged
        return f"orbax cannot read it ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
    if raw.get(MANIFEST_KEY) and not manifest.exists():
        return f"its save did not finish ({MANIFEST} missing)"
    return None


class NoGoodCheckpoint(ValueError):
    """Every checkpoint of a run is damaged (nothing was deleted)."""


def _step_dirs(run_dir: str | os.PathLike) -> list[int]:
    directory = Path(run_dir) / CHECKPOINT_DIR
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())


def latest_good(run_dir: str | os.PathLike, warn=None
                ) -> tuple[tuple[int, dict] | None, list[int]]:
    """((index, meta) of the newest checkpoint that verifies, or None when the run has no
    checkpoint; the newer damaged indices). Each damaged one skipped is a one-line
    warning; NoGoodCheckpoint when there are checkpoints and none verifies."""
    warn = warn or (lambda msg: print(msg, file=sys.stderr))
    found = _step_dirs(run_dir)
    damaged: list[tuple[int, str]] = []
    for index in reversed(found):
        problem = verify(run_dir, index)
        if problem is None:
            for bad, why in damaged:
                warn(f"dreamerjax: warning: checkpoint {bad} of {run_dir} is damaged ({why}); "
                     f"resuming from checkpoint {index}")
            return (index, read_meta(run_dir, index)), [i for i, _ in damaged]
        damaged.append((index, problem))
    if damaged:
        raise NoGoodCheckpoint(
            f"no good checkpoint in {Path(run_dir) / CHECKPOINT_DIR}: "
            + "; ".join(f"{i}: {why}" for i, why in damaged)
            + ". Nothing was deleted; the run cannot be resumed from these files")
    return None, []


def set_aside(run_dir: str | os.PathLike, damaged: Iterable[int]) -> list[Path]:
    """Move damaged checkpoints to run_dir/damaged/<index>-<unix time> (kept for a
    post-mortem, out of orbax's sight so the run can save that index again)."""
    out = []
    for index in damaged:
        src = Path(run_dir) / CHECKPOINT_DIR / str(int(index))
        stamp = int(time.time())
        dst = Path(run_dir) / DAMAGED_DIR / f"{int(index)}-{stamp}"
        while dst.exists():  # the same index set aside twice within a second
            stamp += 1
            dst = dst.with_name(f"{int(index)}-{stamp}")
        dst.parent.mkdir(exist_ok=True)
        os.replace(src, dst)
        out.append(dst)
    return out


def sync(name: str) -> None:
    """Barrier across the processes of a multi-host run (nothing to do in one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        from dreamerjax.run import distributed
        distributed.barrier(name)
        multihost_utils.sync_global_devices(name)


def indices(run_dir: str | os.PathLike) -> list[int]:
    """The complete checkpoints of run_dir, oldest first."""
    manager = _manager(run_dir, read_only=True)
    if manager is None:
        return []
    try:
        return sorted(int(s) for s in manager.all_steps())
    finally:
        manager.close()


def read_meta(run_dir: str | os.PathLike, index: int) -> dict:
    meta = _read_raw_meta(run_dir, index)
    meta.pop(MANIFEST_KEY, None)
    meta.pop(LAYOUT_KEY, None)
    return meta


def _read_raw_meta(run_dir: str | os.PathLike, index: int) -> dict:
    ocp = _ocp()
    manager = _manager(run_dir, read_only=True)
    if manager is None:
        raise FileNotFoundError(f"no checkpoints under {run_dir}")
    try:
        out = manager.restore(int(index), args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(out["meta"])
    finally:
        manager.close()


LAYOUT_META = "layout"  # in the meta: the processes and devices the run was made with


def run_layout(mesh: jax.sharding.Mesh | None) -> dict:
    """The device layout of a run, as its checkpoints record it: {"processes",
    "devices_per_process", "mesh": {axis: size}} (mesh: the plan's, None for one
    device). A multi-process checkpoint holds each process's shards of this layout, which
    no restore checks (it has no packed layout), so a resume must be made alike."""
    processes = jax.process_count()
    devices = 1 if mesh is None else int(mesh.devices.size)
    return {"processes": processes, "devices_per_process": max(1, devices // processes),
            "mesh": {} if mesh is None else {str(k): int(v) for k, v in mesh.shape.items()}}


def describe_layout(layout: Mapping) -> str:
    """'2 processes x 1 device (mesh seed=2)' of a run_layout."""
    p, d = int(layout["processes"]), int(layout["devices_per_process"])
    mesh = " ".join(f"{k}={v}" for k, v in layout.get("mesh", {}).items()) or "none"
    return (f"{p} process{'es' if p != 1 else ''} x {d} device{'s' if d != 1 else ''} "
            f"(mesh {mesh})")


def check_layout(run_dir: str | os.PathLike, layout: Mapping) -> None:
    """ValueError (one line) when the run's newest checkpoint was made with another device
    layout (run_layout, _same_layout) than `layout`; nothing to check without one, or for
    a checkpoint written before layouts were recorded. Reads the meta only, before
    anything compiles."""
    found = _step_dirs(run_dir)
    if not found:
        return
    try:
        saved = read_meta(run_dir, found[-1]).get(LAYOUT_META)
    except Exception:  # noqa: BLE001 - an unreadable newest one: the resume's checks say
        return
    if saved is None or _same_layout(saved, layout):
        return
    raise ValueError(f"--resume {run_dir}: the run was made with {describe_layout(saved)}; "
                     f"this resume has {describe_layout(layout)}: resume it with the "
                     "processes and devices it was made with (--distributed --num-processes "
                     f"{saved['processes']}, --devices, --data-devices)")


def _same_layout(saved: Mapping, layout: Mapping) -> bool:
    """Whether a resume with `layout` restores what `saved` wrote: the same processes, and
    over several processes the same devices and mesh (each process restores its own
    shards). One process's checkpoint is packed whole, its shapes checked on restore
    (_restore_packed), so it may resume over other devices of one process."""
    if saved.get("processes") != layout.get("processes"):
        return False
    if layout.get("processes") == 1:
        return True
    return all(saved.get(k) == layout.get(k) for k in ("devices_per_process", "mesh"))


def complete_rows(run_dir: str | os.PathLike, steps: int) -> int | None:
    """The rows of the run's newest checkpoint when they reach `steps` (the run is
    complete and a resume would train nothing), else None. Reads its meta only (no
    verification: a resume verifies before it restores)."""
    found = _step_dirs(run_dir)
    if not found:
        return None
    try:
        rows = int(read_meta(run_dir, found[-1])["rows"])
    except Exception:  # noqa: BLE001 - an unreadable newest one: the resume's checks say
        return None
    return rows if rows >= steps else None


def latest_verified(run_dir: str | os.PathLike, warn=None) -> tuple[int, dict] | None:
    """latest_good's (index, meta) for readers that only load (eval, load_policy, export):
    a damaged newest checkpoint is skipped with a one-line warning and left in place (only
    a resuming writer sets it aside); NoGoodCheckpoint when none verifies."""
    return latest_good(run_dir, warn)[0]


def chosen(run_dir: str | os.PathLike, checkpoint: int | str) -> list[int]:
    """The checkpoint indices a reader of a run takes (`dreamerjax eval`, evaluate,
    load_policy): a kept checkpoint's index, "latest" (the newest that verifies; a
    damaged newest one: the previous, warned) or "all" (every kept one, oldest first);
    ValueError naming the kept ones when `checkpoint` is not kept or does not verify."""
    kept = indices(run_dir)
    if not kept:
        raise ValueError(f"no checkpoint in {run_dir}")
    if checkpoint == "latest":
        found = latest_verified(run_dir)
        if found is None:
            raise ValueError(f"no checkpoint in {run_dir}")
        return [found[0]]
    picked = kept if checkpoint == "all" else [int(checkpoint)]
    for index in picked:
        if index not in kept:
            raise ValueError(f"checkpoint {index}: not kept in {run_dir} (kept: "
                             f"{', '.join(map(str, kept))}, latest or all)")
        problem = verify(run_dir, index)
        if problem is not None:
            raise ValueError(f"checkpoint {index} of {run_dir} is damaged: {problem}")
    return picked


def split_checkpoint_path(path: str | os.PathLike) -> tuple[Path, int] | None:
    """(run directory, index) of a path RUN/checkpoints/K, else None."""
    path = Path(path)
    run = path.parent.parent
    if path.parent.name == CHECKPOINT_DIR and path.name.isdigit() and (
            run / CONFIG_FILE).is_file():
        return run, int(path.name)
    return None


def _abstract(x: Any) -> Any:
    """A restore target leaf: shape, dtype and (for jax arrays) sharding of x."""
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    if isinstance(x, jax.Array):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
    return x


def _packable(x: Any) -> bool:
    return (not jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended)
            and x.size * x.dtype.itemsize < PACK_BELOW)


def _pack(state: Any) -> tuple[dict, list] | None:
    """(item, layout) of the packed state (module docstring), or None in a multi-process
    run. layout: one [key path, array name, offset, shape, dtype] per leaf, in flattening
    order."""
    if jax.process_count() > 1:
        return None
    flat = jax.tree_util.tree_leaves_with_path(state)
    small = iter(jax.device_get([x for _, x in flat if _packable(x)]))  # one transfer
    item: dict[str, Any] = {}
    pieces: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, int] = {}
    layout = []
    for i, (path, x) in enumerate(flat):
        name = jax.tree_util.keystr(path)
        if _packable(x):
            host = np.asarray(next(small))
            key = f"packed_{host.dtype.name}"
            layout.append([name, key, sizes.get(key, 0), list(host.shape), str(host.dtype)])
            pieces.setdefault(key, []).append(host.reshape(-1))
            sizes[key] = sizes.get(key, 0) + host.size
        else:
            key = f"leaf_{i}"
            item[key] = x
            layout.append([name, key, 0, list(x.shape), str(x.dtype)])
    item.update({key: np.concatenate(group) for key, group in pieces.items()})
    return item, layout


def _packed_target(layout: list, leaf_target) -> dict:
    """The state item's restore target: a numpy array per packed group, leaf_target(i)
    for the i-th layout entry saved as its own array."""
    sizes: dict[str, int] = {}
    out: dict[str, Any] = {}
    for i, (_, key, start, shape, _) in enumerate(layout):
        if key.startswith("packed_"):
            sizes[key] = max(sizes.get(key, 0), start + int(np.prod(shape, dtype=np.int64)))
        else:
            out[key] = leaf_target(i)
    out.update({key: np.empty(n, np.dtype(key.removeprefix("packed_")))
                for key, n in sizes.items()})
    return out


def _unpacked(item: Mapping, entry: list) -> Any:
    _, key, start, shape, _ = entry
    if not key.startswith("packed_"):
        return item[key]
    return item[key][start:start + int(np.prod(shape, dtype=np.int64))].reshape(shape)


def _restore_packed(manager, index: int, layout: list, target: Any) -> Any:
    ocp = _ocp()
    flat, treedef = jax.tree_util.tree_flatten_with_path(target)
    names = [jax.tree_util.keystr(p) for p, _ in flat]
    if len(names) != len(layout):
        raise ValueError(f"{len(layout)} arrays saved, the state has {len(names)}")
    for name, (_, leaf), entry in zip(names, flat, layout, strict=True):
        if (name, tuple(leaf.shape), str(leaf.dtype)) != (entry[0], tuple(entry[3]), entry[4]):
            raise ValueError(f"{entry[0]} {entry[4]}{list(entry[3])} saved where the state "
                             f"has {name} {leaf.dtype}{list(leaf.shape)}")
    item = manager.restore(index, args=ocp.args.Composite(state=ocp.args.StandardRestore(
        _packed_target(layout, lambda i: flat[i][1]))))["state"]
    leaves = [_unpacked(item, entry) for entry in layout]
    host = [i for i, entry in enumerate(layout) if entry[1].startswith("packed_")]
    placed = jax.device_put([leaves[i] for i in host],
                            [getattr(flat[i][1], "sharding", None) for i in host])
    for i, x in zip(host, placed, strict=True):
        leaves[i] = x
    return jax.tree_util.tree_unflatten(treedef, leaves)


def restore(run_dir: str | os.PathLike, index: int, target_state: Any) -> Any:
    """The state of checkpoint `index`, in the structure, dtypes and shardings of
    target_state (a pytree of arrays or jax.ShapeDtypeStruct, e.g. a fresh init)."""
    ocp = _ocp()
    layout = _read_raw_meta(run_dir, index).get(LAYOUT_KEY)
    manager = _manager(run_dir, read_only=True)
    if manager is None:
        raise FileNotFoundError(f"no checkpoints under {run_dir}")
    target = jax.tree.map(_abstract, target_state)
    try:
        if layout is not None:
            return _restore_packed(manager, int(index), layout, target)
        out = manager.restore(int(index), args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target)))
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(
            f"checkpoint {index} of {run_dir} does not fit the target state (was it "
            f"written by another config or version?): {e}") from e
    finally:
        manager.close()
    return out["state"]


def read_leaves(run_dir: str | os.PathLike, index: int, names: Iterable[str]
                ) -> dict[str, np.ndarray] | None:
    """{key path: numpy array} of the named leaves of checkpoint `index`'s state, read
    alone (the packed groups they are in, their own arrays), or None when the checkpoint
    has no layout (one array per leaf: read those with orbax's partial restore). A name
    the checkpoint lacks raises KeyError."""
    ocp = _ocp()
    layout = _read_raw_meta(run_dir, index).get(LAYOUT_KEY)
    if layout is None:
        return None
    entries = {entry[0]: entry for entry in layout}
    want = [entries[name] for name in names]
    needed = {entry[1] for entry in want}
    # Arrays saved alone are read back as numpy arrays too.
    own = [e for e in layout if e[1] in needed]
    target = _packed_target(own, lambda i: np.empty(own[i][3], np.dtype(own[i][4])))
    path = (Path(run_dir) / CHECKPOINT_DIR / str(int(index)) / "state").absolute()
    restore_args = jax.tree.map(lambda x: ocp.RestoreArgs(restore_type=np.ndarray), target)
    item = ocp.PyTreeCheckpointer().restore(path, args=ocp.args.PyTreeRestore(
        item=target, partial_restore=True, restore_args=restore_args))
    return {entry[0]: np.asarray(_unpacked(item, entry)) for entry in want}


def _flatten(d: Mapping) -> dict[str, Any]:
    """Config dict -> {'run.steps': ...}; tuples compare equal to the lists JSON gives."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in flatten(d, ".").items()}


def check_compatible(saved_config: Mapping, config: Mapping,
                     allowed: Iterable[str] = RESUMABLE_FIELDS) -> None:
    """Raise ValueError naming every key where `config` may not resume `saved_config`.

    Both are nested config dicts (Config.to_dict(), plus whatever the caller adds). Only
    the dotted keys in `allowed` may differ and run.steps may not shrink (growing it grows
    a derived replay ring, resume.restore_run). A key the checkpoint's config lacks (a
    field added since it was written) is compatible when the run uses its default.
    """
    from dreamerjax.config.defaults import Config

    old, new = _flatten(saved_config), _flatten(config)
    defaults = _flatten(Config().to_dict())
    allowed = set(allowed)
    problems = []
    for key in sorted(set(old) | set(new)):
        if key in allowed:
            continue
        if key not in new:
            problems.append(f"{key}: {old[key]!r} in the checkpoint, missing now")
        elif key not in old:
            if key not in defaults or defaults[key] != new[key]:
                problems.append(f"{key}: missing in the checkpoint, {new[key]!r} now")
        elif old[key] != new[key]:
            problems.append(f"{key}: {old[key]!r} in the checkpoint, {new[key]!r} now")
    if "run.steps" in old and "run.steps" in new:
        why = steps_may_grow(old["run.steps"], new["run.steps"])
        if why:
            problems.append(f"run.steps: {new['run.steps']} now: {why}")
    if problems:
        raise ValueError("checkpoint comes from an incompatible config:\n  "
                         + "\n  ".join(problems))
