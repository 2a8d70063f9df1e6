"""The driver: compiled chunks of ticks, log points, records, checkpoints, resume.

    train(config, seeds, out)
      -> Trainer: jit(vmap(init_seed)), jit(run_chunk), jit(vmap(evaluate))
      -> for each log interval: chunk -> evaluate -> LogPoint -> callbacks -> files
         -> checkpoint (records, episodes and checkpoint advance together)

A run directory's files are the records of its log points up to its latest checkpoint:
on resume, records.jsonl and episodes.jsonl are cut back to the byte offsets stored in the
checkpoint and the TensorBoard scalars are rewritten from records.jsonl, so a run killed at
any moment resumes without a torn line, a gap or a duplicate. Callbacks (`Callback`) see
every log point and may add fields to its records; their state is kept in the checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import jax
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.defaults import Config, from_dict
from dreamerjax.data import metric_window
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import host_time, memory, precompile, records, testhooks
from dreamerjax.run import lock as runlock
from dreamerjax.run import loop as train_lib
from dreamerjax.run.loop import SeedState, Setup

EVAL_KEY_OFFSET = 1_000_000  # evaluation keys: fold_in(PRNGKey(seed), offset + log index)


# ----------------------------------------------------------------------------- compiled


@dataclasses.dataclass
class Trainer:
    """Owns the compiled functions of a run."""

    setup: Setup
    seeds: tuple[int, ...]
    devices: int = 1

    def __post_init__(self):
        if self.devices > 1 and self.setup.run.seed_loop == "map":
            raise ValueError("run.seed_loop=map runs every seed on one device; with "
                             "--devices N use vmap or auto")
        # Resolved once here: seeds sharded over devices are vmapped on each.
        how = "vmap" if self.devices > 1 else train_lib.seed_loop(self.setup)
        self.setup = setup = train_lib.with_run(self.setup, seed_loop=how)
        self.metric_names = train_lib.metric_names(setup)
        self.updates_due = train_lib.updates_per_tick(setup)
        self.sharding = seed_sharding(self.devices, len(self.seeds))
        names = self.metric_names
        self._init_fn = jax.vmap(lambda k: train_lib.init_seed(setup, k, names))
        self._init = jax.jit(self._init_fn, out_shardings=self.sharding)
        # Pin the seed axis of the chunk's state (and of the episode ends [ticks, seeds,
        # envs]) to the mesh, so every device keeps its own seeds through the whole chunk.
        shard = {}
        if self.sharding is not None:
            mesh, spec = self.sharding.mesh, jax.sharding.PartitionSpec
            due_sh = jax.sharding.NamedSharding(mesh, spec())  # replicated
            ends_sh = jax.sharding.NamedSharding(mesh, spec(None, "seed"))
            shard = {"in_shardings": (self.sharding, due_sh),
                     "out_shardings": (self.sharding, ends_sh)}
        self._chunk = jax.jit(lambda st, due: train_lib.run_chunk(setup, st, due),
                              donate_argnums=0, **shard)
        self._report = jax.jit(lambda st, k: _openl_of_seed(setup, st, k))
        self._eval = jax.jit(self._eval_fn, static_argnums=2)

    def _eval_fn(self, params, keys, mode: bool):
        """Evaluation of every seed: [seeds, episodes] returns and lengths. Each device
        runs its own seeds' while_loop (shard_map): under plain jit the loop's condition
        would be reduced over the sharded seed axis, a collective that also makes every
        device play until the slowest seed's episodes end."""
        setup, eps = self.setup, self.setup.run.eval_episodes
        if self.sharding is None:
            return train_lib.over_seeds(
                setup, lambda p, k: train_lib.evaluate(setup, p, k, eps, mode), params, keys)
        fn = jax.vmap(lambda p, k: train_lib.evaluate(setup, p, k, eps, mode))
        spec = jax.sharding.PartitionSpec("seed")
        # check_vma off: the loop's carry starts from constants (device-invariant) and
        # becomes per-device, which the varying-axes check refuses for loops.
        return jax.shard_map(fn, mesh=self.sharding.mesh, in_specs=(spec, spec),
                             out_specs=spec, check_vma=False)(params, keys)

    def _keys(self) -> np.ndarray:
        # Host inputs go in as numpy arrays: in a multi-host run every process passes the
        # same values, which jit takes as replicated (a device array is process-local).
        return np.stack([np.asarray(jax.random.PRNGKey(s)) for s in self.seeds])

    def init(self) -> SeedState:
        return self._init(self._keys())

    def abstract_state(self) -> SeedState:
        """The state's shapes, dtypes and shardings, without computing it (restore target)."""
        shapes = jax.eval_shape(self._init_fn, self._keys())
        if self.sharding is None:
            return shapes
        return jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=self.sharding), shapes)

    def chunk(self, states: SeedState, log_index: int):
        t = self.setup.ticks_per_log
        due = np.asarray(self.updates_due[log_index * t:(log_index + 1) * t])
        return self._chunk(states, due)

    def report(self, states: SeedState, log_index: int) -> dict:
        """The open-loop report (report.openl) of the first seed, from its replay."""
        from dreamerjax.run import distributed
        distributed.barrier("report")  # slicing out the first seed may move it: a collective
        key = jax.random.fold_in(jax.random.PRNGKey(self.seeds[0]), 2 * EVAL_KEY_OFFSET
                                 + log_index)
        return to_host(self._report(states, np.asarray(key)))

    def evaluate(self, params, log_index: int, mode: bool = False):
        """(returns, lengths) [seeds, episodes] with the evaluation keys of a log point."""
        keys = np.stack([
            np.asarray(jax.random.fold_in(jax.random.PRNGKey(s), EVAL_KEY_OFFSET + log_index))
            for s in self.seeds])
        return self._eval(params, keys, mode)


def make_trainer(setup: Setup, seeds, devices: int = 1) -> Trainer:
    """The Trainer of a setup; host envs (gym_, atari_, dmc_, crafter_) get
    host_driver.HostTrainer, which steps them on the CPU between compiled calls."""
    from dreamerjax.run import host_trainer as host_driver
    if host_driver.is_host_setup(setup):
        return host_driver.HostTrainer(setup, tuple(seeds), devices)
    return Trainer(setup, tuple(seeds), devices)


def _openl_of_seed(setup: Setup, states: SeedState, key) -> dict:
    """report.openl on a batch sampled from the first seed's replay."""
    from dreamerjax.data import replay as replay_lib
    from dreamerjax.viz import report

    first = jax.tree.map(lambda x: x[0], states)
    _, batch, _ = replay_lib.replay_sample(first.replay, key, setup.run.batch_size,
                                           setup.window_length)
    return report.openl(first.agent.params, setup.config.agent, setup.spaces, batch)


def write_report(run: Run, states: SeedState, point: LogPoint, writer) -> list:
    """The open-loop report of a log point: files under run_dir/report (the latest log
    point's) and TensorBoard images. Nothing before the first update (the replay cannot
    be sampled yet). Every process of a multi-host run calls it (the report gathers the
    first seed's arrays, a collective); only the primary writes."""
    from dreamerjax.viz import report

    if point.records[0]["updates"] <= 0:
        return []
    host = run.trainer.report(states, point.log_index)
    if not run.primary:
        return []
    title = f"{run.config.run.env}, seed {run.seeds[0]}, {point.rows} rows: "
    files = report.write_openl(host, os.path.join(run.out, "report"), title)
    for path in files:
        if path.suffix == ".png":
            writer.add_image(run.seeds[0], point.rows, f"report/{path.stem}", path)
    return files


def seed_sharding(devices: int, num_seeds: int):
    """NamedSharding of the seed axis over `devices` devices (None for one)."""
    if devices <= 1:
        return None
    avail = jax.devices()
    if devices > len(avail):
        raise ValueError(f"--devices {devices} but only {len(avail)} JAX devices are visible")
    if num_seeds % devices:
        raise ValueError(f"{num_seeds} seeds cannot be split evenly over {devices} devices")
    mesh = jax.sharding.Mesh(np.array(avail[:devices]), ("seed",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("seed"))


def to_host(tree):
    """numpy copies of (possibly sharded) arrays; gathered from every process when the run
    spans several (each process holds only its own seeds' shards)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        from dreamerjax.run import distributed
        jax.block_until_ready(tree)  # this process's own work first: it may lag by minutes
        distributed.barrier("to_host")
        tree = multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree.map(np.asarray, tree)


def enable_compile_cache(enabled: bool = True) -> None:
    """The persistent XLA compilation cache under ~/.cache/dreamerjax/jax."""
    if not enabled:
        return
    path = os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")),
                        "dreamerjax", "jax")
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# ----------------------------------------------------------------------------- callbacks


@dataclasses.dataclass
class LogPoint:
    """What a log point hands to callbacks (host values).

    records: one dict per seed (records.jsonl lines); a callback may add fields.
    episodes: the training episodes finished in this interval (episodes.jsonl lines).
    """

    log_index: int
    rows: int
    seeds: tuple[int, ...]
    num_envs: int
    records: list[dict]
    episodes: list[dict]
    config: Config


class Callback(Protocol):
    """Observer of a run (brax's progress_fn, with state that survives a resume)."""

    name: str

    def on_log(self, point: LogPoint) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: Mapping) -> None: ...


# ----------------------------------------------------------------------------- driver


@dataclasses.dataclass
class Run:
    """The host side of one train() call."""

    config: Config
    seeds: tuple[int, ...]
    out: str
    trainer: Trainer
    callbacks: Sequence[Callback]
    primary: bool

    @property
    def num_logs(self) -> int:
        return self.config.run.steps // self.config.run.eval_every


def _episodes(ends, seeds, first_tick: int) -> list[dict]:
    """Episode ends [ticks, seeds, envs] (host arrays) -> episodes.jsonl rows. An episode
    finished by the env step of tick k ends on row k + 1 of its env (row 0 is the first
    reset row)."""
    out = []
    for t, i, w in zip(*np.nonzero(np.asarray(ends.ended)), strict=True):
        out.append(records.episode_row(
            seed=seeds[i], worker=w, row_last=first_tick + t + 1,
            length=ends.length[t, i, w], score=ends.score[t, i, w],
            terminal=ends.terminal[t, i, w],
            **{k: v[t, i, w] for k, v in getattr(ends, "stats", {}).items()}))
    out.sort(key=lambda e: (e["seed"], e["row_last"], e["worker"]))
    return out


class NonFiniteLoss(FloatingPointError):
    """A loss turned NaN or inf: the run stops before that log point's records."""

    def __init__(self, message: str, update: int, seeds: list[int], rows: int):
        super().__init__(message)
        self.update, self.seeds, self.rows = update, seeds, rows


def _check_finite(bad: np.ndarray, seeds, rows: int, out: str) -> None:
    if (bad >= 0).any():
        update = int(bad[bad >= 0].min())
        which = [s for s, b in zip(seeds, bad, strict=True) if b >= 0]
        raise NonFiniteLoss(
            f"non-finite loss at update {update} (seeds {which}); stopped at row "
            f"{rows}; the last good checkpoint in {out} is kept", update, which, rows)


def log_point(run: Run, states: SeedState, ends, log_index: int, t0: float
              ) -> tuple[LogPoint, dict]:
    """Evaluate and assemble the records of one log point (no I/O).

    t0: the run's start on the time.time() clock (less a resumed run's earlier run time);
    wall_s is taken once the chunk's and the evaluation's results are on the host (the
    chunk is dispatched asynchronously: a clock read before would miss its execution).
    """
    cfg = run.config
    setup = run.trainer.setup
    rets, lens = run.trainer.evaluate(states.agent.params, log_index)
    rn = states.agent.retnorm
    host = to_host({"rets": rets, "lens": lens, "ends": ends, "bad": states.bad_update,
                    "updates": states.updates, "lo": rn.low, "hi": rn.high,
                    "window": states.window})
    wall = time.time() - t0
    rows = (log_index + 1) * cfg.run.eval_every
    episodes = _episodes(host["ends"], run.seeds, log_index * setup.ticks_per_log)
    _check_finite(host["bad"], run.seeds, rows, run.out)
    recs = []
    for i, seed in enumerate(run.seeds):
        lo, hi = float(host["lo"][i]), float(host["hi"][i])
        recs.append(records.record_row(
            seed=seed, rows=rows, updates=int(host["updates"][i]),
            eval_returns=host["rets"][i].tolist(), eval_lengths=host["lens"][i].tolist(),
            train_means=metric_window.result(host["window"], i),
            retnorm={"lo": lo, "hi": hi, "scale": max(cfg.agent.retnorm.limit, hi - lo)},
            wall_s=wall))
    keys = [name for name, _ in getattr(setup.spec, "episode_keys", ())]
    for rec in recs:
        mine = [e for e in episodes if e["seed"] == rec["seed"]]
        scores = [e["score"] for e in mine]
        rec["train_return"] = float(np.mean(scores)) if scores else None
        rec.update(records.episode_stats(mine, keys))  # the suite's log_* keys, if any
    point = LogPoint(log_index, rows, run.seeds, cfg.run.num_envs, recs, episodes, cfg)
    return point, host


def _meta(run: Run, point: LogPoint, host: dict, writer, wall: float) -> dict:
    return {"config": run.config.to_dict(), "seeds": list(run.seeds),
            "log_index": point.log_index, "rows": point.rows,
            "updates": [int(u) for u in host["updates"]], "wall_s": wall,
            "positions": writer.positions(),
            "callbacks": {cb.name: cb.state_dict() for cb in run.callbacks}}


def _should_checkpoint(config: Config, log_index: int, num_logs: int) -> bool:
    every = config.run.checkpoint_every
    return every > 0 and ((log_index + 1) % every == 0 or log_index + 1 == num_logs)


def _should_report(config: Config, log_index: int, num_logs: int) -> bool:
    """The open-loop report every run.report_every log points and at the last (0: never)."""
    every = config.run.report_every
    return every > 0 and ((log_index + 1) % every == 0 or log_index + 1 == num_logs)


NOT_WORLD_MODEL = ("actor", "critic", "replay_critic")


def world_model_loss(train: Mapping, scales: Mapping[str, float]) -> float | None:
    """The scaled world-model loss of a window's means: the decoder terms (one per
    observation key) + reward + cont + dyn + rep, each times its loss scale (scales:
    agent.loss_scales)."""
    terms = [(train.get(f"{k}_loss"), w) for k, w in scales.items() if k not in NOT_WORLD_MODEL]
    terms = [(v, w) for v, w in terms if v is not None]
    return sum(v * w for v, w in terms) if terms else None


def status_line(point: LogPoint, updates_per_s: float, scales: Mapping[str, float]) -> str:
    """One grep-able line per log point (means over seeds); scales: agent.loss_scales.
    What is not known yet is said: before the first update the losses and speed give way
    to "(no update yet)", and a value no seed has (no training episode ended in the
    interval) reads n/a."""
    def mean(values, digits):
        values = [v for v in values if v is not None]
        return f"{float(np.mean(values)):.{digits}f}" if values else "n/a"

    recs = point.records
    line = (f"[dreamerjax] rows {point.rows} updates {recs[0]['updates']} "
            f"eval_return {mean((r['eval_mean'] for r in recs), 1)} "
            f"train_return {mean((r['train_return'] for r in recs), 1)} ")
    if recs[0]["updates"] <= 0:
        return line + "(no update yet)"
    return line + (
        f"wm_loss {mean((world_model_loss(r['train'], scales) for r in recs), 3)} "
        f"actor_entropy {mean((r['train'].get('ent/action/mean') for r in recs), 3)} "
        f"updates/s {updates_per_s:.2f}")


def restore_run(run: Run, found: tuple[int, dict]) -> tuple[SeedState, dict]:
    """The state of a checkpoint, in the current run's shapes (the replay grows when the
    run's --steps grew and its capacity is derived from them)."""
    index, meta = found
    saved = from_dict(meta["config"])
    old_setup = train_lib.make_setup(saved)
    trainer = run.trainer
    target_trainer = trainer
    if old_setup.capacity != trainer.setup.capacity:
        target_trainer = dataclasses.replace(trainer, setup=old_setup)
    states = ckpt.restore(run.out, index, target_trainer.abstract_state())
    if old_setup.capacity != trainer.setup.capacity:
        from dreamerjax.data.replay import replay_grow
        states = states.replace(replay=replay_grow(states.replay, trainer.setup.capacity))
    for cb in run.callbacks:
        cb.load_state_dict(meta.get("callbacks", {}).get(cb.name, {}))
    return states, meta


def _rebuild_tensorboard(out: str, writer) -> None:
    """TensorBoard scalars rewritten from records.jsonl (after it was cut back)."""
    shutil.rmtree(os.path.join(out, records.TB_DIR), ignore_errors=True)
    for r in records.read_records(out):
        writer.add_scalars(r["seed"], r["rows"], records.tb_scalars(r))


# ----------------------------------------------------------------------------- safety


_stop: list[str] = []  # why a stop was requested (request_stop), in order


def request_stop(reason: str) -> None:
    """Ask the running train() to stop at its next safe point: after the current log
    point's records and its checkpoint (saved then even off the checkpoint_every
    schedule). Safe from a signal handler (the CLI's SIGTERM / SIGINT) or a callback."""
    _stop.append(reason)


def stop_requested() -> str | None:
    """The first reason a stop was requested in this train() call, or None."""
    return _stop[0] if _stop else None


DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO,
                         errno.EFBIG, errno.EPERM})
DISK_WORDS = ("No space left", "Disk quota", "Read-only file system", "Permission denied",
              "Input/output error")


class WriteFailed(OSError):
    """A write of the run directory failed (a full disk, a quota, a read-only or
    unwritable directory): the run stopped, its last good checkpoint is intact."""


def _write_error(e: BaseException) -> BaseException | None:
    """The OSError (or a library's error quoting one) behind e, if e is a failed write."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            return e
        if any(w in str(e) for w in DISK_WORDS):
            return e
        e = e.__cause__ or e.__context__
    return None


def _last_good_text(out: str) -> str:
    try:
        found = ckpt.indices(out)
        index = found[-1] if found else None
        rows = ckpt.read_meta(out, index)["rows"] if index is not None else None
    except Exception:  # noqa: BLE001 - a report of what is left must not fail itself
        index = rows = None
    if index is None:
        return "it has no checkpoint yet (a --resume starts it again from row 0)", None, None
    return (f"its last good checkpoint is {os.path.join(out, ckpt.CHECKPOINT_DIR, str(index))}"
            f" (row {rows})"), index, rows


def _guarded(fn):
    """train() with its run directory's guards: one writer (runlock), a failed write
    turned into WriteFailed naming the last good checkpoint, a non-finite loss leaving
    a marker that --resume refuses."""
    import functools
    import inspect

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        out, resume = str(bound.arguments["out"]), bool(bound.arguments["resume"])
        primary = jax.process_index() == 0
        if resume:
            runlock.check_not_nonfinite(out)
        existed = os.path.exists(out)
        if primary:
            runlock.acquire(out, "--resume" if resume else "--out")
        try:
            return fn(*args, **kwargs)
        except NonFiniteLoss as e:
            _close_progress_bars()
            text, index, rows = _last_good_text(out)
            if primary:
                with contextlib.suppress(OSError):
                    runlock.write_nonfinite_stop(out, {
                        "update": e.update, "rows": e.rows, "seeds": e.seeds,
                        "last_good_checkpoint": index, "last_good_rows": rows})
            raise NonFiniteLoss(
                f"non-finite loss at update {e.update} (seeds {e.seeds}); stopped at row "
                f"{e.rows}; {text}; --resume refuses this run (it would repeat the same "
                "loss)", e.update, e.seeds, e.rows) from e
        except Exception as e:
            _close_progress_bars()
            cause = _write_error(e)
            if cause is None:
                raise
            text = _last_good_text(out)[0]
            raise WriteFailed(f"writing the run directory failed ({cause}); the run "
                              f"stopped; {text}: make room and continue with `dreamerjax "
                              f"train --resume {out}`") from e
        finally:
            _stop.clear()  # a stop asked for belongs to this call only
            if primary:
                runlock.release(out)
                if not existed:  # refused before writing (e.g. memory): leave no trace
                    with contextlib.suppress(OSError):
                        os.rmdir(out)

    return wrapper


def _close_progress_bars() -> None:
    """End a progress bar an exception left open, so the error starts its own line."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", None) or ()):
        with contextlib.suppress(Exception):
            bar.close()


def _resume_point(out: str, primary: bool) -> tuple[int, dict] | None:
    """The checkpoint a resume continues from: the newest that verifies (checkpoint.py);
    newer damaged ones are moved to run_dir/damaged/ (a warning each), so the files are
    cut back to the good one's offsets and its log points run again."""
    found, damaged = ckpt.latest_good(out)
    if damaged and primary:
        for path in ckpt.set_aside(out, damaged):
            print(f"dreamerjax: warning: moved the damaged checkpoint to {path}",
                  file=sys.stderr)
    ckpt.sync("dreamerjax_resume_point")
    return found


@_guarded
def train(config: Config, seeds: Sequence[int], out: str, resume: bool = False,
          devices: int = 1, progress: bool = True, compile_cache: bool = True,
          stop_after_rows: int | None = None, callbacks: Sequence[Callback] = (),
          tensorboard: bool = True, report: bool = True) -> list[dict]:
    """Run (or resume) a training run; returns the records written by this call.

    callbacks: observers called at each log point, before its records are written.
    report: write the world model's open-loop report at each log point (report.py).
    stop_after_rows ends the call early at that log point (as an interruption would),
    leaving a checkpoint to resume from; the run's config is unchanged.
    """
    seeds = tuple(int(s) for s in seeds)
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be unique and non-empty, got {list(seeds)}")
    setup = train_lib.make_setup(config)
    memory.check_replay(setup, len(seeds), devices)  # before anything is allocated
    enable_compile_cache(compile_cache)
    if precompile.wanted(compile_cache):  # XLA's compile peak paid in a child process
        precompile.precompile(setup, seeds, devices,
                              report=report and config.run.report_every > 0)
    run = Run(config, seeds, out, make_trainer(setup, seeds, devices), tuple(callbacks),
              primary=jax.process_index() == 0)
    # realpath: --out may be a link to a directory not made yet (e.g. on another disk).
    os.makedirs(os.path.realpath(out), exist_ok=True)
    found = _resume_point(out, run.primary) if resume else None
    positions = found[1].get("positions") if found else None
    if resume and found is None:
        positions = {"records_bytes": 0, "episodes_bytes": 0}  # killed before a checkpoint
    if found:
        check_resumable(found[1], config, seeds)
        states, meta = restore_run(run, found)
        start_log, wall0 = meta["log_index"] + 1, meta["wall_s"]
    else:
        states, start_log, wall0 = run.trainer.init(), 0, 0.0
    writer_cls = records.RunWriter if run.primary else records.NullWriter
    written = []
    bar = _progress(progress and run.primary, config.run.steps,
                    start_log * config.run.eval_every)
    t0 = time.time() - wall0
    phases = host_time.Phases()  # host_s of the records (host_time.py)
    with writer_cls(out, resume=positions, tensorboard=tensorboard) as writer:
        writer.write_config(config.to_dict() | {"seeds": list(seeds)})
        if positions is not None:
            _rebuild_tensorboard(out, writer)
        for log_index in range(start_log, run.num_logs):
            if stop_after_rows is not None and log_index * config.run.eval_every >= \
                    stop_after_rows:
                break
            tick0, updates0 = time.time(), (written[-1]["updates"] if written else None)
            testhooks.point("chunk", log_index)
            precompile.before_chunk()  # glibc's freed heap back before the update's buffers
            with phases("chunk"):
                states, ends = run.trainer.chunk(states, log_index)
                jax.block_until_ready((states.updates, ends))
            with phases("evaluate"):
                point, host = log_point(run, states, ends, log_index, t0)
            with phases("callbacks"):
                for cb in run.callbacks:
                    cb.on_log(point)
            if report and _should_report(config, log_index, run.num_logs):
                with phases("report"):
                    write_report(run, states, point, writer)
            # host_s, and wall_s read again: the report above counts in this record.
            host_time.stamp(point.records, phases, time.time() - t0)
            with phases("write"):
                writer.add_episodes(point.episodes)
                testhooks.point("records")
                writer.add_records(point.records)
                testhooks.point("tensorboard")
                for r in point.records:
                    writer.add_scalars(r["seed"], point.rows, records.tb_scalars(r))
            written += point.records
            states = states.replace(window=metric_window.reset(states.window))
            stop = stop_requested()
            if _should_checkpoint(config, log_index, run.num_logs) or (
                    stop and config.run.checkpoint_every > 0):
                wall = time.time() - t0
                with phases("checkpoint"):
                    ckpt.save(out, log_index, states, _meta(run, point, host, writer, wall))
            if stop:
                _say_stopped(stop, out, point.rows, config.run.checkpoint_every > 0,
                             run.primary)
                break
            done = point.records[-1]["updates"] - (
                updates0 if updates0 is not None else start_updates(found))
            line = status_line(point, done / max(time.time() - tick0, 1e-9),
                               agent_lib.loss_scales(config.agent, setup.spaces))
            if bar is not None:
                bar.update(config.run.eval_every)
                bar.write(line, file=sys.stderr)
            elif run.primary and progress:
                print(line, file=sys.stderr)
    if bar is not None:
        bar.close()
    if run.primary:
        from dreamerjax.viz import plots
        with phases("plots"):
            plots.plot_run(out)
        if progress and written:
            print(host_time.tail_line(phases.take()), file=sys.stderr)
    ckpt.sync("dreamerjax_train_done")  # other processes wait for process 0's files
    return written


def _say_stopped(reason: str, out: str, rows: int, saved: bool, primary: bool) -> None:
    testhooks.point("stopped")
    if not primary:
        return
    if saved:
        print(f"dreamerjax: {reason}: stopped at row {rows} after its checkpoint; continue "
              f"with: dreamerjax train --resume {out}", file=sys.stderr)
    else:
        print(f"dreamerjax: {reason}: stopped at row {rows}; this run writes no "
              "checkpoints (--checkpoint-every 0), so it cannot be resumed", file=sys.stderr)


def start_updates(found) -> int:
    """Updates of the last seed at the checkpoint resumed from (0 for a fresh run)."""
    if not found:
        return 0
    updates = found[1].get("updates", 0)
    return int(updates[-1] if isinstance(updates, list) else updates)


def check_resumable(meta: Mapping, config: Config, seeds: tuple[int, ...]) -> None:
    """Refuse to resume a checkpoint with another config or other seeds. The checkpoint's
    config is read as a Config first, so one written before a field was renamed or added
    (loss_scales.dec -> dec_cnn / dec_mlp) compares in today's fields."""
    from dreamerjax.config.defaults import from_dict

    ckpt.check_compatible(from_dict(meta["config"]).to_dict(), config.to_dict())
    if tuple(meta["seeds"]) != tuple(seeds):
        raise ValueError(f"seeds: the checkpoint has {meta['seeds']}, this run {list(seeds)}")


def _progress(enabled: bool, total: int, initial: int):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="rows", dynamic_ncols=True)


# ----------------------------------------------------------------------------- run dirs


def evaluate_run(run_dir: str, episodes: int, mode: bool = False) -> list[dict]:
    """Evaluate the latest checkpoint of a run: one dict per seed."""
    config, seeds = records.read_run_config(run_dir)
    config = dataclasses.replace(
        config, run=dataclasses.replace(config.run, eval_episodes=episodes))
    trainer = make_trainer(train_lib.make_setup(config), seeds)
    found = ckpt.latest_verified(run_dir)  # a damaged newest one: the previous, warned
    if found is None:
        raise ValueError(f"no checkpoint in {run_dir}")
    # Only the agent's params are read (as load_policy reads them); the replay stays on disk.
    from dreamerjax.run.policy import stacked_params

    params = stacked_params(run_dir, found[0], config, trainer.setup.spaces, len(seeds))
    rets, _ = trainer.evaluate(params, 10**6, mode)
    return [{"seed": s, "returns": r.tolist(), "mean": float(r.mean())}
            for s, r in zip(seeds, np.asarray(rets), strict=True)]


def eval_artifacts(run_dir: str, report: bool = False, video: str | os.PathLike | None = None,
                   mode: bool = False) -> list:
    """The latest checkpoint's open-loop report (run_dir/report) and a video of one
    evaluation episode of the first seed; returns the files written."""
    from dreamerjax.viz import report as report_lib
    from dreamerjax.viz import video as video_lib

    config, seeds = records.read_run_config(run_dir)
    trainer = make_trainer(train_lib.make_setup(config), seeds)
    found = ckpt.latest_verified(run_dir)  # a damaged newest one: the previous, warned
    if found is None:
        raise ValueError(f"no checkpoint in {run_dir}")
    states = ckpt.restore(run_dir, found[0], trainer.abstract_state())
    written = []
    if report:
        host = trainer.report(states, found[0])
        title = f"{config.run.env}, seed {seeds[0]}, {found[1]['rows']} rows: "
        written += report_lib.write_openl(host, os.path.join(run_dir, "report"), title)
    if video is not None:
        params = jax.tree.map(lambda x: x[0], states.agent.params)
        key = jax.random.fold_in(jax.random.PRNGKey(seeds[0]), 3 * EVAL_KEY_OFFSET)
        episode = video_lib.rollout(trainer.setup, params, key, mode)
        written.append(video_lib.write_video(
            video, video_lib.frames(config.run.env, episode)))
    return written


def describe(config: Config) -> dict[str, Any]:
    """Parameter counts per module of a config's agent (no compile)."""
    from dreamerjax.algo import agent as agent_lib
    setup = train_lib.make_setup(config)
    params = jax.eval_shape(
        lambda k: agent_lib.init_params(k, config.agent, setup.spaces), jax.random.PRNGKey(0))
    return agent_lib.param_counts(params)
