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
import re
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import jax
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo import spaces as spaces_lib
from dreamerjax.config.defaults import Config, from_dict, replay_rows_per_env
from dreamerjax.data import metric_window
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import host_time, outputs, records, transfer
from dreamerjax.run import lock as runlock
from dreamerjax.run import plan as plan_lib
from dreamerjax.run import precompile as precompile_lib
from dreamerjax.run.callbacks import as_callbacks
from dreamerjax.run.plan import Plan
from dreamerjax.run.setup import SeedState
from dreamerjax.run.trainers import Trainer, make_trainer, to_host

# ----------------------------------------------------------------------------- compiled


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


def default_compile_cache_dir() -> str:
    """The command line's persistent compilation cache: ~/.cache/dreamerjax/jax (under
    XDG_CACHE_HOME when set)."""
    return os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")),
                        "dreamerjax", "jax")


def enable_compile_cache(cache: bool | str | os.PathLike | None = True) -> None:
    """Point jax.config's persistent compilation cache at `cache` (a directory; True: the
    command line's, default_compile_cache_dir()); None or False leaves jax.config alone."""
    if cache is None or cache is False:
        return
    path = default_compile_cache_dir() if cache is True else os.fspath(cache)
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


# ----------------------------------------------------------------------------- result


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What train() returns: brax's (make_policy, params, metrics) as one object.

    records: the records.jsonl lines this call wrote, one dict per seed per log point.
    params: each trained seed's agent parameters at the end of the call, {seed: nested
        dict of numpy arrays} (the paths of docs/architecture.md, "Parameters and names";
        no seed axis); at the last log point these are the ones its checkpoint holds.
    config, seeds, out: the run's.
    spaces: the agent's observation and action spaces (algo/spaces.Spaces).

    `policy(obs, seed=...)` acts in this process; `make_policy(seed)` is the Policy
    (run/policy.py) that `load_policy(out, seed)` would read from the checkpoint.
    """

    records: list[dict]
    params: Mapping[int, dict]
    config: Config
    seeds: tuple[int, ...]
    out: str
    spaces: spaces_lib.Spaces = dataclasses.field(repr=False)
    # How the env takes actions (run/policy.EnvActions): the policy's actions are the env's.
    env_actions: Any = dataclasses.field(default=None, repr=False)
    # One Policy per seed, made on first use: each holds its own jitted acting step.
    _policies: dict = dataclasses.field(default_factory=dict, init=False, repr=False,
                                        compare=False)

    def make_policy(self, seed: int | None = None):
        """The Policy of seed `seed` (default: the first trained), from the parameters in
        memory; the same object load_policy builds from a checkpoint."""
        from dreamerjax.run.policy import Policy, PolicyError

        seed = self.seeds[0] if seed is None else int(seed)
        if seed not in self.params:
            raise PolicyError(f"seed {seed} was not trained (seeds {list(self.seeds)})")
        if seed not in self._policies:
            self._policies[seed] = Policy(self.config, self.spaces, self.params[seed], seed,
                                          source=f"train(out={self.out!r}) in memory",
                                          env_actions=self.env_actions)
        return self._policies[seed]

    def policy(self, obs: Any, seed: int | None = None, state: Mapping | None = None,
               key: jax.Array | None = None, mode: str = "sample",
               raw: bool = False) -> tuple[Any, dict]:
        """One acting step of seed `seed`'s policy for a batch: obs {key: [B, *shape]} (as
        Policy.act takes it, `is_first` [B] optional). Returns (action, state): the env's
        action as Policy.act gives it (continuous: clipped and rescaled to the env's
        bounds; raw=True: the agent's own); state None starts B fresh episodes
        (Policy.init: the key of the seed), a returned state continues them."""
        policy = self.make_policy(seed)
        if state is None:
            state = policy.init(_batch_size(obs))
        return policy.act(obs, state, key=key, mode=mode, raw=raw)


def _batch_size(obs: Any) -> int:
    """B of a batch of observations (a dict of [B, ...] arrays, or one such array)."""
    first = next(iter(obs.values())) if isinstance(obs, Mapping) else obs
    return int(np.shape(first)[0])


def _params_by_seed(params, seeds: tuple[int, ...]) -> dict[int, dict]:
    """Stacked agent params [seeds, ...] (possibly sharded, on device) -> {seed: host
    params}. Every process calls it (to_host gathers across processes)."""
    host = to_host(params)
    return {seed: jax.tree.map(lambda x, i=i: x[i], host) for i, seed in enumerate(seeds)}


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
            **{k: v[t, i, w] for k, v in ends.stats.items()}))
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


def log_point(run: Run, states: SeedState, ends, log_index: int) -> tuple[LogPoint, dict]:
    """Evaluate and assemble the records of one log point (no I/O). Their timing fields
    are stamped by the caller just before they are written (host_time.stamp), after the
    results are on the host and the report is written: the chunk is dispatched
    asynchronously, so a clock read before would miss its execution."""
    cfg = run.config
    setup = run.trainer.setup
    rets, lens = run.trainer.evaluate(states.agent.params, log_index)
    rn = states.agent.retnorm
    host = to_host({"rets": rets, "lens": lens, "ends": ends, "bad": states.bad_update,
                    "updates": states.updates, "lo": rn.low, "hi": rn.high,
                    "window": states.window})
    whole = setup.run  # the whole run's rows, every process's envs (plan.processes_config)
    rows = (log_index + 1) * whole.eval_every
    episodes = _episodes(host["ends"], run.seeds, log_index * setup.ticks_per_log)
    _check_finite(host["bad"], run.seeds, rows, run.out)
    recs = []
    for i, seed in enumerate(run.seeds):
        lo, hi = float(host["lo"][i]), float(host["hi"][i])
        recs.append(records.record_row(
            seed=seed, rows=rows, updates=int(host["updates"][i]),
            eval_returns=host["rets"][i].tolist(), eval_lengths=host["lens"][i].tolist(),
            train_means=metric_window.result(host["window"], i),
            retnorm={"lo": lo, "hi": hi, "scale": max(cfg.agent.retnorm.limit, hi - lo)}))
    keys = [name for name, _ in setup.spec.episode_keys]
    for rec in recs:
        mine = [e for e in episodes if e["seed"] == rec["seed"]]
        scores = [e["score"] for e in mine]
        rec["train_return"] = float(np.mean(scores)) if scores else None
        rec.update(records.episode_stats(mine, keys))  # the suite's log_* keys, if any
    point = LogPoint(log_index, rows, run.seeds, whole.num_envs, recs, episodes, cfg)
    return point, host


def _meta(run: Run, point: LogPoint, host: dict, writer, wall: float) -> dict:
    return {"config": run.config.to_dict(), "seeds": list(run.seeds),
            "log_index": point.log_index, "rows": point.rows,
            ckpt.LAYOUT_META: ckpt.run_layout(run.trainer.plan.mesh),
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
# The status line's figures read from a window's metric means: figure -> the metric names
# that carry it, the first one a record has (29eb964's tensorstats mean, e3f0224's own
# scalar: agent.loss_metrics, metrics_e3f0224.loss_metrics_e3f0224). wm_loss is world_model_loss's.
STATUS_METRICS = {"actor_entropy": ("ent/action/mean", "ent/action")}


def world_model_loss(train: Mapping, scales: Mapping[str, float]) -> float | None:
    """The scaled world-model loss of a window's means: the decoder terms (one per
    observation key) + reward + cont + dyn + rep, each times its loss scale (scales:
    agent.loss_scales)."""
    terms = [(train.get(f"{k}_loss"), w) for k, w in scales.items() if k not in NOT_WORLD_MODEL]
    terms = [(v, w) for v, w in terms if v is not None]
    return sum(v * w for v, w in terms) if terms else None


def status_line(point: LogPoint, updates_per_s: float, scales: Mapping[str, float]) -> str:
    """One grep-able line per log point (means over seeds): rows, updates, then the names
    that logger.filter finds (re.search) among the line's figures and the records' scalars
    (records.tb_scalars). What is not known yet is said: before the first update the
    losses and speed give way to "(no update yet)", and a value no seed has (no training
    episode ended in the interval) reads n/a. scales: agent.loss_scales."""
    def mean(values, fmt):
        values = [v for v in values if v is not None]
        return format(float(np.mean(values)), fmt) if values else "n/a"

    recs = point.records
    shown = {"eval_return": mean((r["eval_mean"] for r in recs), ".1f"),
             "train_return": mean((r["train_return"] for r in recs), ".1f")}
    updated = recs[0]["updates"] > 0
    if updated:
        shown["wm_loss"] = mean((world_model_loss(r["train"], scales) for r in recs), ".3f")
        for figure, names in STATUS_METRICS.items():
            shown[figure] = mean((next((r["train"][n] for n in names if n in r["train"]), None)
                                  for r in recs), ".3f")
        shown["updates/s"] = f"{updates_per_s:.2f}"
        # Then every scalar of the records (mean over seeds) but the two shown above.
        names = dict.fromkeys(k for r in recs for k in records.tb_scalars(r))
        for name in [n for n in names if n not in ("eval/eval_mean", "episode/train_return")]:
            shown[name] = mean((records.tb_scalars(r).get(name) for r in recs), ".4g")
    keep = re.compile(point.config.logger.filter).search  # logger.filter, as the reference's
    parts = [f"[dreamerjax] rows {point.rows} updates {recs[0]['updates']}",
             *(f"{k} {v}" for k, v in shown.items() if keep(k))]
    return " ".join(parts if updated else [*parts, "(no update yet)"])


def restore_run(run: Run, found: tuple[int, dict]) -> tuple[SeedState, dict]:
    """The state of a checkpoint, in the current run's shapes (the replay grows when the
    run's --steps grew and its capacity is derived from them)."""
    index, meta = found
    # The saved run differs from this one at most in what may change on resume; of that
    # only the replay's capacity changes a shape (it follows run.steps).
    capacity = replay_rows_per_env(from_dict(meta["config"]).run)
    trainer = run.trainer
    target_trainer = trainer
    if capacity != trainer.setup.capacity:
        saved = dataclasses.replace(trainer.setup, capacity=capacity)
        target_trainer = dataclasses.replace(
            trainer, plan=dataclasses.replace(trainer.plan, setup=saved))
    states = ckpt.restore(run.out, index, target_trainer.abstract_state())
    if capacity != trainer.setup.capacity:
        from dreamerjax.data.replay import replay_grow
        replay = states.replay
        if replay.memory == "host":  # grown on the host, then put back in host memory
            replay = replay.replace(data=jax.device_get(replay.data))
        replay = replay_grow(replay, trainer.setup.capacity)
        if replay.memory == "host":
            replay = replay.replace(data=jax.device_put(
                replay.data, trainer.state_sharding().replay.data))
        states = states.replace(replay=replay)
    for cb in run.callbacks:
        cb.load_state_dict(meta.get("callbacks", {}).get(cb.name, {}))
    return states, meta


def _rebuild_tensorboard(out: str, writer) -> None:
    """TensorBoard scalars rewritten from records.jsonl (after it was cut back)."""
    shutil.rmtree(os.path.join(out, records.TB_DIR), ignore_errors=True)
    for r in records.read_records(out):
        writer.add_scalars(r["seed"], r["rows"], records.tb_scalars(r))


# ----------------------------------------------------------------------------- safety


class StopRequest:
    """Asks a running train() to stop at its next safe point: after the current log
    point's records and its checkpoint (saved then even off the checkpoint_every
    schedule). `request` is safe from a signal handler (the CLI's SIGTERM / SIGINT) or a
    callback; give the same object to train(stop=...)."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def request(self, reason: str) -> None:
        self.reasons.append(reason)

    @property
    def reason(self) -> str | None:
        """The first reason a stop was requested, or None."""
        return self.reasons[0] if self.reasons else None


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
        elif primary:  # the processes of a multi-host run share out; only process 0 writes
            # A fresh run into a used directory would append to its records and overwrite
            # its config, then fail at its first checkpoint: refused before anything is
            # built, compiled or written (the command line refuses with this same check).
            runlock.check_new(out)
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
          devices: int = 1, progress: bool = True,
          compile_cache: bool | str | os.PathLike | None = None,
          stop_after_rows: int | None = None, callbacks: Sequence[Callback | Any] = (),
          tensorboard: bool = True, report: bool = True, precompile: bool = False,
          malloc_trim: bool = False, stop: StopRequest | None = None,
          target_return: float | None = None, plan: Plan | None = None) -> TrainResult:
    """Run (or resume) a training run into `out` (a new or empty directory; resume=True
    continues the run in it). Returns a TrainResult: the records written by this call,
    every seed's final parameters and a policy that acts with them.

    callbacks: observers called at each log point, before its records are written: a
    function of the LogPoint, or a Callback whose state the checkpoint keeps.
    report: write the world model's open-loop report at each log point (viz/report.py).
    stop: a StopRequest that asks the run to stop at its next safe point (the CLI's
    SIGTERM / SIGINT handler holds one). stop_after_rows ends the call early at that log
    point (as an interruption would), leaving a checkpoint to resume from. target_return
    ends it at the first log point where every seed's evaluation mean reaches that return,
    with that point's checkpoint and open-loop report (a run trained "until solved").

    What it changes in this process, each only when asked (the command line asks for
    all three; dreamerjax.cli_settings() gives the same): compile_cache, a directory (True:
    the command line's, ~/.cache/dreamerjax/jax), points jax.config's persistent
    compilation cache there (None, the default, leaves jax.config alone);
    precompile=True first compiles the run's programs in a child process (precompile.py;
    needs the cache), so this process never holds XLA's compile peak; malloc_trim=True
    hands glibc's freed heap back after compiles and before each chunk. Neither changes a
    number of the run.

    plan: the run's plan (run/plan.make_plan of config, seeds and devices), when the
    caller made it already (the command line's preflight does); None makes it here. The
    plan is where the config is validated, once.
    """
    seeds = tuple(int(s) for s in seeds)
    callbacks = as_callbacks(callbacks)  # a plain function is a stateless Callback
    if plan is None:  # before a precompile child or a logger starts, nothing allocated
        plan = plan_lib.make_plan(config, seeds, devices)
    elif (plan.config, plan.seeds, plan.devices) != (config, seeds, devices):
        raise ValueError("plan: made for another config, seeds or devices than train's")
    setup = plan.setup
    if resume:  # another device layout than the run's, refused before anything compiles
        ckpt.check_layout(out, ckpt.run_layout(plan.mesh))
    done = ckpt.complete_rows(out, setup.run.steps) if resume else None
    if done is not None and jax.process_index() == 0:  # said at once; the call returns
        print(f"dreamerjax: {out} is complete at {done:,} rows (steps={config.run.steps}): "
              f"nothing to train; to train on, resume it with a larger steps, e.g. "
              f"steps={2 * config.run.steps}", file=sys.stderr)  # its final params
    # W&B and MLflow (logger.outputs): a missing package or login refused before compiling.
    loggers = outputs.build(config, out, seeds, resume, primary=jax.process_index() == 0)
    # Started, they run until closed: any failure from here on (the precompile child, the
    # trainer's compile, a log interval, the plots) ends them as failed, not left running.
    primary = jax.process_index() == 0
    # A line now and then while the programs compile and each chunk runs, where no bar is.
    heartbeat = host_time.Heartbeat(HEARTBEAT_S, progress and primary
                                    and not sys.stderr.isatty())
    with outputs.closed_on_error(loggers), heartbeat:
        enable_compile_cache(compile_cache)
        if progress and primary:  # at once, before the compile's minutes
            print(f"[dreamerjax] {setup.run.env}, seeds {list(seeds)}: {setup.run.steps:,} "
                  f"rows, a log point every {setup.run.eval_every:,}; compiling, then "
                  "training to the first (a line at every log point)", file=sys.stderr,
                  flush=True)
        heartbeat.say("compiling")
        if precompile and compile_cache:  # XLA's compile peak paid in a child process
            heartbeat.say("compiling the run's programs in a child process")
            precompile_lib.precompile(plan, report=report and config.run.report_every > 0)
        run = Run(config, seeds, out, make_trainer(plan), (*callbacks, *loggers),
                  primary=primary)
        # realpath: --out may be a link to a directory not made yet (e.g. on another disk).
        os.makedirs(os.path.realpath(out), exist_ok=True)
        loop = _Loop(progress, stop_after_rows, tensorboard and outputs.tensorboard(config),
                     report, stop or StopRequest(), malloc_trim, host_time.Phases(),
                     tuple(loggers), target_return, heartbeat)
        with precompile_lib.trimming(malloc_trim), contextlib.closing(run.trainer), \
                host_time.CompileClock() as clock:
            written, params = _run(run, resume, loop, clock)
        if run.primary:
            with loop.phases("plots"):
                records.plot_run(out)
            if progress and written:
                print(host_time.tail_line(loop.phases.take()), file=sys.stderr)
    outputs.close(loggers, ok=True, run_dir=out)  # the curves go to them first
    ckpt.sync("dreamerjax_train_done")  # other processes wait for process 0's files
    from dreamerjax.run.policy import env_actions_of

    return TrainResult(written, _params_by_seed(params, seeds), config, seeds, str(out),
                       setup.spaces, env_actions_of(config, setup))


@dataclasses.dataclass(frozen=True)
class _Loop:
    """train()'s options for the loop over log intervals."""

    progress: bool
    stop_after_rows: int | None
    tensorboard: bool
    report: bool
    stop: StopRequest
    malloc_trim: bool
    phases: host_time.Phases  # host_s of the records (host_time.py)
    loggers: tuple  # the W&B / MLflow outputs (run/outputs.py), also among the callbacks
    target_return: float | None = None  # stop once every seed's eval_mean reaches it
    heartbeat: host_time.Heartbeat | None = None  # a line now and then where no bar is


HEARTBEAT_S = 60.0  # seconds between the lines of a run's progress where no bar is drawn


def target_reached(records: Sequence[dict], target: float | None) -> str | None:
    """The stop reason when every seed's evaluation mean of this log point reaches target
    (None: no target, or not reached yet)."""
    if target is None or not records or any(r["eval_mean"] < target for r in records):
        return None
    return f"every seed's evaluation return reached {target:g} (--target-return)"


def _run(run: Run, resume: bool, loop: _Loop,
         clock: host_time.CompileClock) -> tuple[list[dict], dict]:
    """The log intervals of a train() call, from the start or the checkpoint resumed:
    (the records written, the agent params [seeds, ...] at the end). Only the params are
    returned, so the rest of the state (the replay) is freed with this frame. clock: the
    seconds spent compiling, left out of each interval's updates/s."""
    found = _resume_point(run.out, run.primary) if resume else None
    positions = found[1].get("positions") if found else None
    if resume and found is None:
        positions = {"records_bytes": 0, "episodes_bytes": 0}  # killed before a checkpoint
    if found:
        check_resumable(found[1], run.config, run.seeds)
        states, meta = restore_run(run, found)
        start_log, wall0 = meta["log_index"] + 1, meta["wall_s"]
    else:
        states, start_log, wall0 = run.trainer.init(), 0, 0.0
        # a fresh run only: one that resumes keeps its own state (run/transfer.py)
        states = transfer.load_into(states, run.config, run.seeds, run.trainer.setup.spaces)
    run_cfg = run.trainer.setup.run  # rows of the whole run (plan.processes_config)
    writer_cls = records.RunWriter if run.primary else records.NullWriter
    bar = _progress(loop.progress and run.primary, run_cfg.steps,
                    start_log * run_cfg.eval_every)
    written, t0 = [], time.time() - wall0
    with writer_cls(run.out, resume=positions, tensorboard=loop.tensorboard) as writer:
        writer.write_config(records.config_file(run.config, run.seeds))
        if positions is not None:
            _rebuild_tensorboard(run.out, writer)
        for log_index in range(start_log, run.num_logs):
            if loop.stop_after_rows is not None and \
                    log_index * run_cfg.eval_every >= loop.stop_after_rows:
                break
            tick0 = time.time()
            clock.take()  # what compiled before this interval is not its own
            updates0 = written[-1]["updates"] if written else start_updates(found)
            if loop.heartbeat is not None:
                loop.heartbeat.say(f"{'compiling and t' if not written else 'T'}raining to "
                                   f"row {(log_index + 1) * run_cfg.eval_every:,}")
            states, point = _interval(run, states, log_index, writer, t0, loop)
            written += point.records
            # the interval's updates over its time less what it spent compiling (the first
            # interval's chunk, evaluation and report programs)
            busy = max(time.time() - tick0 - clock.take(), 1e-3)
            # the log point is complete (records, checkpoint) whether or not the run stops
            # here, so it gets its line as every other: the last one shows what was reached
            _say_progress(run, point, (point.records[-1]["updates"] - updates0) / busy, bar,
                          loop.progress)
            if loop.stop.reason:
                break
    if bar is not None:
        bar.close()
    if loop.stop.reason and written:  # after the bar is closed: the reason on its own line
        _say_stopped(loop.stop.reason, run.out, written[-1]["rows"],
                     run_cfg.checkpoint_every > 0, run.primary)
    return written, states.agent.params


def _interval(run: Run, states: SeedState, log_index: int, writer, t0: float,
              loop: _Loop) -> tuple[SeedState, LogPoint]:
    """One log interval: its chunk of ticks, then the log point's evaluation, callbacks,
    records, report and checkpoint."""
    if loop.malloc_trim:
        precompile_lib.malloc_trim()  # glibc's freed heap back before the update's buffers
    phases = loop.phases
    with phases("chunk"):
        states, ends = run.trainer.chunk(states, log_index)
        jax.block_until_ready((states.updates, ends))
    with phases("evaluate"):
        point, host = log_point(run, states, ends, log_index)
    with phases("callbacks"):
        for cb in run.callbacks:
            cb.on_log(point)
    reached = target_reached(point.records, loop.target_return)
    if reached:
        loop.stop.request(reached)
    # a run ended at its target reports there, as it would at its last log point
    if loop.report and (_should_report(run.config, log_index, run.num_logs) or (
            reached and run.config.run.report_every > 0)):
        with phases("report"):
            files = write_report(run, states, point, writer)
            outputs.add_files(loop.loggers, point.rows, files)
    # wall_s and host_s, read once the results are on the host and the report is written:
    # both count in this record.
    host_time.stamp(point.records, phases, time.time() - t0)
    with phases("write"):
        writer.add_episodes(point.episodes)
        writer.add_records(point.records)
        for r in point.records:
            writer.add_scalars(r["seed"], point.rows, records.tb_scalars(r))
    states = states.replace(window=metric_window.reset(states.window))
    if _should_checkpoint(run.config, log_index, run.num_logs) or (
            loop.stop.reason and run.config.run.checkpoint_every > 0):
        wall = time.time() - t0
        with phases("checkpoint"):
            ckpt.save(run.out, log_index, states, _meta(run, point, host, writer, wall))
    return states, point


def _say_progress(run: Run, point: LogPoint, updates_per_s: float, bar, progress: bool):
    line = status_line(point, updates_per_s,
                       agent_lib.loss_scales(run.config.agent, run.trainer.setup.spaces))
    if bar is not None:
        bar.update(run.trainer.setup.run.eval_every)
        bar.write(line, file=sys.stderr)
    elif run.primary and progress:
        print(line, file=sys.stderr)


def _say_stopped(reason: str, out: str, rows: int, saved: bool, primary: bool) -> None:
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
    """A progress bar on a terminal, and in a notebook (tqdm.auto: a widget where
    ipywidgets is installed); redirected to a file or a pipe (a cluster's job log), stderr
    gets the status lines (and the heartbeat's) alone, since a bar's carriage returns
    would garble it."""
    if not enabled:
        return None
    if sys.stderr.isatty():
        from tqdm import tqdm
    elif _in_notebook():
        from tqdm.auto import tqdm
    else:
        return None
    return tqdm(total=total, initial=initial, unit="rows", dynamic_ncols=True)


def _in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's shell with a kernel)."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return shell is not None and hasattr(shell, "kernel")
