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

This module is the loop; its neighbours hold the rest of a train() call: guard.py (the run
directory's lock, failed writes, non-finite losses, StopRequest), resume.py (the
checkpoint resumed and its state), report.py (the open-loop report), status.py (the status
line and progress bar), result.py (TrainResult), callbacks.py (LogPoint, Callback) and
precompile.py (the compile cache and the precompile child).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.defaults import Config
from dreamerjax.data import metric_window
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import (
    host_time,
    outputs,
    records,
    replay_files,
    replay_io,
    status,
    transfer,
    videos,
)
from dreamerjax.run import plan as plan_lib
from dreamerjax.run import precompile as precompile_lib
from dreamerjax.run import resume as resume_lib
from dreamerjax.run.callbacks import Callback, LogPoint, as_callbacks
from dreamerjax.run.guard import NonFiniteLoss, StopRequest, guarded
from dreamerjax.run.plan import Plan
from dreamerjax.run.processes import to_host
from dreamerjax.run.report import should_report, write_report
from dreamerjax.run.result import TrainResult, params_by_seed
from dreamerjax.run.settings import Settings
from dreamerjax.run.setup import SeedState
from dreamerjax.run.sharding import without_rows
from dreamerjax.run.trainers import Trainer, make_trainer

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
    files: replay_files.ReplayFiles | None = None  # the replay's files (set by _run)

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



def train(config: Config | Plan, seeds: Sequence[int], out: str, *, resume: bool = False,
          devices: int | None = None, callbacks: Sequence[Callback | Any] = (),
          progress: bool = True, tensorboard: bool = True, report: bool = True,
          stop_after_rows: int | None = None, target_return: float | None = None,
          settings: Settings | None = None) -> TrainResult:
    """Run (or resume) a training run into `out` (a new or empty directory; resume=True
    continues the run in it). Returns a TrainResult: the records written by this call,
    every seed's final parameters and a policy that acts with them.

    config: the run's Config, or its Plan (run/plan.make_plan of a config, the seeds and
    the devices) when the caller made it already (the command line's preflight does); a
    Config's plan is made here. The plan is where the config is validated, once.
    devices: the groups of seeds of a Config's run (default 1); a Plan has its own.
    callbacks: observers called at each log point, before its records are written: a
    function of the LogPoint, or a Callback whose state the checkpoint keeps.
    progress: the status line of each log point (and a progress bar) on stderr.
    tensorboard: TensorBoard scalars beside the records. report: write the world
    model's open-loop report at its log points (viz/report.py).
    stop_after_rows ends the call early at that log point (as an interruption would),
    leaving a checkpoint to resume from. target_return ends it at the first log point
    where every seed's evaluation mean reaches that return, with that point's checkpoint
    and open-loop report (a run trained "until solved").

    settings: what the call may change in its process (the compilation cache, a
    precompile child, malloc_trim) and a StopRequest (run/settings.Settings); None, the
    default, changes nothing. dreamerjax.cli_settings() gives the command line's.
    """
    settings = settings or Settings()
    timeline = host_time.Timeline(settings.marks)  # run_dir/timing.json
    with guarded(out, resume):  # the run directory's lock, failed writes, NaNs
        seeds = tuple(int(s) for s in seeds)
        callbacks = as_callbacks(callbacks)  # a plain function is a stateless Callback
        # before a precompile child or a logger starts, nothing allocated
        plan = plan_of(config, seeds, devices)
        config, setup = plan.config, plan.setup
        resumed = None  # the checkpoint a resume continues from, for its first line
        if resume:  # another device layout than the run's, refused before anything compiles
            ckpt.check_layout(out, ckpt.run_layout(plan.mesh))
            resumed = resume_lib.check_replay_files(out)  # and a replay file missing or damaged
        videos.check(plan)  # --video-every where no video can be made: refused now
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
        heartbeat = host_time.Heartbeat(status.HEARTBEAT_S, progress and primary
                                        and not sys.stderr.isatty())
        with outputs.closed_on_error(loggers), heartbeat:
            precompile_lib.enable_compile_cache(settings.compile_cache)
            timeline.mark("compile_start")
            if progress and primary:  # at once, before the compile's minutes
                print(status.start_line(setup.run, seeds, out, resumed), file=sys.stderr,
                      flush=True)
            heartbeat.say("compiling")
            # The compile peak in a child, where one can open the devices; on a TPU, where
            # none can, the trainer's own programs compiled here at once and kept, so its
            # calls run them (precompile.compiles_here).
            trainer = make_trainer(plan)
            here = precompile_lib.compiles_here(settings.precompile_here)
            if settings.precompile and (here or settings.compile_cache):
                heartbeat.say("compiling the run's programs at once" if here else
                              "compiling the run's programs in a child process")
                # a child: the trainer's programs lowered here meanwhile, then loaded from
                # the cache; here: lowered, compiled on threads and handed to the trainer
                precompile_lib.precompile(plan, report=report and config.run.report_every > 0,
                                          here=here, trainer=trainer,
                                          meanwhile=_import_later_modules)
            timeline.mark("programs_ready")  # compiled, or compiled at their first calls
            run = Run(config, seeds, out, trainer, (*callbacks, *loggers), primary=primary)
            # realpath: --out may be a link to a directory not made yet (e.g. on another disk).
            os.makedirs(os.path.realpath(out), exist_ok=True)
            loop = _Loop(progress, stop_after_rows, tensorboard and outputs.tensorboard(config),
                         report, settings.stop or StopRequest(), settings.malloc_trim,
                         host_time.Phases(),
                         tuple(loggers), target_return, heartbeat,
                         videos.LogVideos(plan, out, loggers, primary), timeline)
            with precompile_lib.trimming(settings.malloc_trim), \
                    contextlib.closing(run.trainer), contextlib.closing(loop.videos), \
                    host_time.CompileClock() as clock:
                written, params = _run(run, resume, loop, clock)
            if run.primary:
                with loop.phases("plots"):
                    records.plot_run(out)
                if progress and written:
                    print(host_time.tail_line(loop.phases.take()), file=sys.stderr)
                timeline.mark("end")
                timeline.write(out, written[::len(seeds)], clock.total)
        outputs.close(loggers, ok=True, run_dir=out)  # the curves go to them first
        ckpt.sync("dreamerjax_train_done")  # other processes wait for process 0's files
        from dreamerjax.run.policy import env_actions_of

        return TrainResult(written, params_by_seed(params, seeds), config, seeds, str(out),
                           setup.spaces, env_actions_of(config, setup))


def _import_later_modules() -> None:
    """What a run imports after its programs are ready (orbax for its checkpoints,
    matplotlib for its report and plots), imported while the programs compile (in a
    precompile child or on this process's threads), when this process waits anyway,
    rather than in its first log interval and at its end."""
    import orbax.checkpoint  # noqa: F401

    from dreamerjax.viz import plots

    plots.pyplot()


def plan_of(config: Config | Plan, seeds: tuple[int, ...], devices: int | None) -> Plan:
    """train()'s plan: a Plan as it is (its seeds are the run's, its devices its own), a
    Config's made here."""
    if not isinstance(config, Plan):
        return plan_lib.make_plan(config, seeds, 1 if devices is None else devices)
    if devices is not None:
        raise ValueError(f"devices: a Plan has its own ({config.devices}); give train the "
                         "plan alone, or its config with devices")
    if seeds != config.seeds:
        raise ValueError(f"seeds: the plan was made for {list(config.seeds)}, train was "
                         f"given {list(seeds)}")
    return config


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
    videos: videos.LogVideos | None = None  # the evaluation videos of log points
    timeline: host_time.Timeline | None = None  # run_dir/timing.json's moments



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
    found = resume_lib.resume_point(run.out, run.primary) if resume else None
    positions = found[1].get("positions") if found else None
    if resume and found is None:
        positions = {"records_bytes": 0, "episodes_bytes": 0}  # killed before a checkpoint
    if found:
        resume_lib.check_resumable(found[1], run.config, run.seeds)
        states, meta = resume_lib.restore_run(run.trainer, run.out, run.callbacks, found)
        start_log, wall0 = meta["log_index"] + 1, meta["wall_s"]
    else:
        states, start_log, wall0 = run.trainer.init(), 0, 0.0
        # a fresh run only: one that resumes keeps its own state (run/transfer.py)
        states = transfer.load_into(states, run.trainer.plan)
        if run.config.run.replay_from:  # run.replay_from: rows before the first tick
            states = replay_io.fill_states(states, run.trainer.setup, run.seeds)
    run.files = replay_files.start(run.out, run.seeds, states.replay,
                                   run.config.agent.rssm.classes, found, resume, run.primary,
                                   run.config.run.replay_chunksize)
    run_cfg = run.trainer.setup.run  # rows of the whole run (plan.processes_config)
    writer_cls = records.RunWriter if run.primary else records.NullWriter
    bar = status.progress_bar(loop.progress and run.primary, run_cfg.steps,
                    start_log * run_cfg.eval_every)
    written, t0 = [], time.time() - wall0
    with writer_cls(run.out, resume=positions, tensorboard=loop.tensorboard) as writer:
        writer.write_config(records.config_file(run.config, run.seeds))
        if positions is not None:
            resume_lib.rebuild_tensorboard(run.out, writer)
        for log_index in range(start_log, run.num_logs):
            if loop.stop_after_rows is not None and \
                    log_index * run_cfg.eval_every >= loop.stop_after_rows:
                break
            tick0 = time.time()
            clock.take()  # what compiled before this interval is not its own
            updates0 = written[-1]["updates"] if written else resume_lib.start_updates(found)
            if loop.heartbeat is not None:
                loop.heartbeat.say(f"{'compiling and t' if not written else 'T'}raining to "
                                   f"row {(log_index + 1) * run_cfg.eval_every:,}")
            if loop.malloc_trim:  # glibc's freed heap back before the update's buffers
                precompile_lib.malloc_trim()
            with loop.phases("chunk"):  # the interval's ticks
                states, ends = run.trainer.chunk(states, log_index)
                jax.block_until_ready((states.updates, ends))
            states, point = _at_log_point(run, states, ends, log_index, writer, t0, loop)
            if loop.timeline is not None:
                loop.timeline.mark("first_log_point", once=True)
                loop.timeline.mark("last_log_point")
            written += point.records
            # the interval's updates over its time less what it spent compiling (the first
            # interval's chunk, evaluation and report programs)
            busy = max(time.time() - tick0 - clock.take(), 1e-3)
            # the log point is complete (records, checkpoint) whether or not the run stops
            # here, so it gets its line as every other: the last one shows what was reached
            scales = agent_lib.loss_scales(run.config.agent, run.trainer.setup.spaces)
            status.say_progress(point, (point.records[-1]["updates"] - updates0) / busy,
                                scales, bar, run_cfg.eval_every, run.primary and loop.progress)
            if loop.stop.reason:
                break
    run.files.close()
    if bar is not None:
        bar.close()
    if loop.stop.reason and written:  # after the bar is closed: the reason on its own line
        status.say_stopped(loop.stop.reason, run.out, written[-1]["rows"],
                     run_cfg.checkpoint_every > 0, run.primary)
    return written, states.agent.params


def _at_log_point(run: Run, states: SeedState, ends, log_index: int, writer, t0: float,
                  loop: _Loop) -> tuple[SeedState, LogPoint]:
    """The log point after a log interval's chunk (states, its episode ends): the
    evaluation, callbacks, records, report and checkpoint."""
    phases = loop.phases
    with phases("evaluate"):
        point, host = log_point(run, states, ends, log_index)
    with phases("callbacks"):
        for cb in run.callbacks:
            cb.on_log(point)
    reached = target_reached(point.records, loop.target_return)
    if reached:
        loop.stop.request(reached)
    # a run ended at its target reports there, as it would at its last log point
    if loop.report and (should_report(run.config, log_index, run.num_logs) or (
            reached and run.config.run.report_every > 0)):
        with phases("report"):
            files = write_report(run.trainer, states, point, writer, run.out, run.primary)
            outputs.add_files(loop.loggers, point.rows, files)
    if loop.videos is not None and loop.videos.due(log_index):
        with phases("video"):
            loop.videos.write(states.agent.params, point, writer)
    # wall_s and host_s, read once the results are on the host and the report is written:
    # both count in this record.
    host_time.stamp(point.records, phases, time.time() - t0)
    with phases("write"):
        writer.add_episodes(point.episodes)
        writer.add_records(point.records)
        for r in point.records:
            writer.add_scalars(r["seed"], point.rows, records.tb_scalars(r))
        run.files.add(states.replay)  # the interval's rows to the chunk files
    states = states.replace(window=metric_window.reset(states.window))
    if _should_checkpoint(run.config, log_index, run.num_logs) or (
            loop.stop.reason and run.config.run.checkpoint_every > 0):
        wall = time.time() - t0
        with phases("checkpoint"):
            states = _checkpoint(run, states, log_index, _meta(run, point, host, writer, wall),
                                 phases)
    return states, point


def _checkpoint(run: Run, states: SeedState, log_index: int, meta: dict,
                phases: host_time.Phases) -> SeedState:
    """Checkpoint `log_index`: the replay files brought up to it (run/replay_files.py),
    then the state less the replay's rows, with the files' state in its meta. Returns the
    state with the saved latents' marks cleared. Its parts' seconds go to `phases` as
    checkpoint_replay, checkpoint_state and checkpoint_tidy (within `checkpoint`)."""
    with phases("checkpoint_replay"):
        part = run.files.checkpoint(states.replay, log_index)
        meta[replay_files.META_KEY] = replay_files.gather_meta(part)
        states = states.replace(replay=replay_files.clear_dirty(states.replay))
    with phases("checkpoint_state"):
        ckpt.save(run.out, log_index, without_rows(states), meta,
                  keep=run.config.run.checkpoint_keep)
    # the latent files no kept checkpoint lists; every process reads the metas (orbax's
    # reader lines the processes up), process 0 removes
    with phases("checkpoint_tidy"):
        kept = [ckpt.read_meta(run.out, i) for i in ckpt.indices(run.out)]
        if run.primary:
            replay_files.remove_unreferenced(run.out, run.seeds, kept)
    return states
