"""The `dreamerjax` command: train | eval | info | export | parity | compare | bench | demo |
replay.

Each subcommand parses into a frozen dataclass (tools/args.py: field docstrings are its
--help), checks what it can without compiling anything, and only then imports its
implementation, so a module that is missing or broken fails that subcommand alone, with a
clear message. This module parses, runs the subcommand and reports its result or error.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tyro

from dreamerjax.tools.args import (
    DEMO_LEARNED,
    ArgumentError,
    BenchArgs,
    Command,
    CompareArgs,
    DemoArgs,
    EnvsArgs,
    EvalArgs,
    ExportArgs,
    InfoArgs,
    MergeArgs,
    ParityArgs,
    ReplayArgs,
    ReplayExportArgs,
    SummaryArgs,
    TrainArgs,
    _given_flags,
    check_flag_values,
    config_line,
    resolve_args,
)

# ---------------------------------------------------------------------------------------
# Dispatch


def _str_or_none(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _code(result: Any) -> int:
    """Exit status of an implementation's return value (None / non-int -> 0)."""
    if isinstance(result, bool):
        return 0 if result else 1
    return result if isinstance(result, int) else 0


def resume_config(args: TrainArgs):
    """(config, seeds) of `--resume RUN`: the run's config.json merged with the flags and
    --set keys that may change (config/resolve.resume_merge); ArgumentError naming the
    first flag or key that conflicts with it. Checked by the run's plan (preflight)."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.keys import ConfigError, NotResumable
    from dreamerjax.run.records import read_run_config

    try:
        config, seeds = read_run_config(args.resume)
    except ValueError as e:
        raise ArgumentError(f"--resume {args.resume}: {e}") from e
    try:
        return config_resolve.resume_merge(config, seeds, _given_flags(args),
                                           args.set), tuple(seeds)
    except NotResumable as e:
        raise ArgumentError(f"{e}; start a new run from it with --config "
                            f"{Path(args.resume) / 'config.json'} --out NEW_DIR") from e
    except ConfigError as e:
        raise ArgumentError(config_line(e, args)) from e


def require_backend() -> None:
    """Start the JAX backend JAX_PLATFORMS asks for, or refuse in one line saying what to
    change (ArgumentError: a TPU-only or GPU-only request on a machine without one),
    before anything is built or compiled."""
    from dreamerjax.tools import accelerators

    error = accelerators.backend_error()
    if error is not None:
        raise ArgumentError(error)


def plan_of_args(args: TrainArgs):
    """The run's plan (run/plan.Plan) of `dreamerjax train`'s arguments: a new run's config
    from its flags, or a resumed run's with the flags that may change it; checked once
    (preflight)."""
    if args.resume is not None:
        config, seeds = resume_config(args)
    else:
        config, seeds = resolve_args(args, check=False)[0], args.seeds
    return preflight(config, seeds, args)


def train_command(args: TrainArgs) -> int:
    import json
    import time

    if args.distributed:  # before the driver's imports start a JAX backend
        from dreamerjax.run import distributed
        distributed.start(args.coordinator, args.num_processes, args.process_id)
    require_backend()
    marks = [("jax_ready", time.time())]  # the run's timing.json (run/host_time.Timeline)
    plan = plan_of_args(args)
    marks.append(("plan", time.time()))
    out, resume = str(args.run_dir), args.resume is not None
    seeds = plan.seeds
    from dreamerjax.run import checkpoint, driver, guard
    from dreamerjax.run.settings import Settings

    if resume:
        rows = checkpoint.complete_rows(out, plan.setup.run.steps)
        if rows is not None:  # said at once, before anything compiles
            steps = plan.config.run.steps
            print(f"dreamerjax train: {out} is complete at {rows:,} rows (--steps {steps}); "
                  f"to train on, pass a larger --steps: dreamerjax train --resume {out} "
                  f"--steps {2 * steps}", file=sys.stderr)
            return 0

    stop = guard.StopRequest()
    signals = _stop_on_signals(stop.request)
    try:
        settings = Settings(compile_cache=not args.no_compile_cache, stop=stop,
                            marks=tuple(marks), precompile_here=args.compile_here or None,
                            **process_options(args))
        recs = driver.train(plan, seeds, out, resume=resume, settings=settings,
                            target_return=args.target_return).records
    finally:
        _restore_signals(signals)
    if recs:
        last = recs[-len(seeds):]
        print(json.dumps({"rows": last[0]["rows"], "updates": last[0]["updates"],
                          "eval_mean": [r["eval_mean"] for r in last]}))
    print(f"curves: {Path(out) / 'curves.png'}")
    received = signals["received"]
    return 128 + received[0] if received else 0


# Conveniences: environment variables that turn off what a flag turns off. They are read
# here and nowhere else (the library takes these as arguments).
_OPT_OUT_VARIABLES = {"precompile": "DREAMERJAX_PRECOMPILE",
                      "malloc_trim": "DREAMERJAX_MALLOC_TRIM",
                      "xla_tuning": "DREAMERJAX_XLA_TUNING"}


def opted_in(args, name: str) -> bool:
    """Whether a process option (precompile, malloc_trim, xla_tuning) is on: unless its
    --no-* flag is given or its variable is 0."""
    import os

    return not getattr(args, f"no_{name}", False) and \
        os.environ.get(_OPT_OUT_VARIABLES[name], "1") != "0"


def process_options(args) -> dict[str, bool]:
    """The precompile and malloc_trim of this command's Settings (run/settings.py)."""
    return {name: opted_in(args, name) for name in ("precompile", "malloc_trim")}


def preflight(config, seeds, args):
    """What can be refused before the driver is imported and anything compiles: the
    logger outputs' packages, the env's suite, then the run's plan (run/plan.make_plan:
    the config's one check, the setup's with the env built once, the devices' and the
    replay's memory). Returns the plan; a config's error names the flag given
    (ArgumentError)."""
    from dreamerjax import envs
    from dreamerjax.config import keys as configs
    from dreamerjax.run import outputs
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run.setup import EnvError

    try:
        outputs.check_installed(config)  # logger.outputs: the W&B / MLflow extra
    except outputs.OutputError as e:
        raise ArgumentError(str(e)) from e
    try:  # the suite and its packages; the env is built once, by the plan's setup
        suite = envs.parse_env_id(config.run.env)[0]
        if suite.compiled:
            suite.load(config.run.env)
        else:
            from dreamerjax.envs.host import base as host
            host.require_extra(config.run.env)
    except ValueError as e:
        raise ArgumentError(f"--env {config.run.env!r}: {e}") from e
    try:
        plan = plan_lib.make_plan(config, seeds, args.devices)
        if getattr(args, "resume", None) is None:  # a resumed run's replay is its own
            from dreamerjax.run import replay_io
            replay_io.check(plan.setup, plan.seeds)
        return plan
    except EnvError as e:  # a host env that cannot be built, before the config's values
        raise ArgumentError(str(e)) from e
    except configs.ConfigError as e:
        raise ArgumentError(config_line(e, args)) from e


def _stop_on_signals(request_stop) -> dict:
    """SIGTERM / SIGINT ask the driver to stop at its next safe point (after the current
    log point's checkpoint); a second one ends the process at once (a crash, which a
    resume also survives). Returns what _restore_signals needs and the signals received."""
    import signal

    state = {"received": [], "previous": {}}

    def handler(signum, frame):
        state["received"].append(signum)
        name = signal.Signals(signum).name
        print(f"dreamerjax: {name}: stopping after this log point's checkpoint (again to "
              "stop at once)", file=sys.stderr, flush=True)
        request_stop(name)
        signal.signal(signum, signal.SIG_DFL)

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            state["previous"][sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: leave the signals alone
            break
    return state


def _restore_signals(state: dict) -> None:
    import signal

    for sig, previous in state["previous"].items():
        signal.signal(sig, previous)


def info_command(args: InfoArgs) -> int:
    from dreamerjax.config import docs_tables as config_docs
    from dreamerjax.config.keys import ConfigError
    from dreamerjax.envs.registry import MissingExtra
    from dreamerjax.run import memory, rundir
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.tools import accelerators

    config, provenance = resolve_args(args, check=False)
    try:  # the plan's first part: the config validated once, its setup built once
        setup = plan_lib.run_setup(config)
    except ConfigError as e:
        raise ArgumentError(config_line(e, args)) from e
    except MissingExtra as e:
        # The resolved config is shown whatever the env; the networks need its spaces.
        print(config_docs.describe(config, provenance))
        print(f"Networks not counted: {e}")
        return 0
    print(config_docs.describe(config, provenance))
    counts = rundir.describe(setup)
    print(f"Optimised variables: {counts.pop('total'):,}")
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{v:>12,}  {k}")
    have, where = (memory.host_available(), memory.HOST_WHERE) if (
        config.run.replay_memory == "host") else memory.available()
    print(f"{memory.describe(setup, 1)} per seed ({memory.fmt(have)} {where})")
    per_seed = memory.replay_bytes(setup, 1)
    fit = have // per_seed if per_seed else 0
    print(f"Seeds whose replays fit there: {fit:,}" + (
        "" if fit else " (lower --steps or set run.replay_capacity; on an accelerator "
        "--set run.replay_memory=host)"))
    for line in accelerators.describe():
        print(line)
    return 0


def eval_command(args: EvalArgs) -> int:
    import json

    from dreamerjax.run import rundir

    if args.run_dir.is_file():  # an exported policy (validate refused what it lacks)
        return _eval_policy_file(args)
    try:  # the run's plan and trainer, made once for its evaluation, report and video
        trainer = rundir.run_trainer(str(args.run_dir), args.episodes)
        rows = rundir.evaluate_run(str(args.run_dir), args.episodes, mode=args.mode == "mode",
                                   checkpoint=args.checkpoint, trainer=trainer)
    except ValueError as e:  # "checkpoint K: ..." names the flag that chose it
        message = str(e)
        raise ArgumentError(f"--{message}" if message.startswith("checkpoint ") else message
                            ) from e
    for row in rows:
        print(json.dumps(row))
    if args.plot is not None:
        from dreamerjax.viz import plots

        curve = [{"seed": r["seed"], "rows": r["rows"], "updates": r["updates"],
                  "eval_mean": r["mean"]} for r in rows]
        print(f"wrote {plots.plot_curves(curve, args.plot)}")
    if args.report or args.video is not None:
        for path in rundir.eval_artifacts(str(args.run_dir), report=args.report,
                                          video=args.video, mode=args.mode == "mode",
                                          trainer=trainer):
            print(f"wrote {path}")
    return 0


def _eval_policy_file(args: EvalArgs) -> int:
    """`dreamerjax eval FILE.npz`: the file's seed on fresh episodes, the rows that its
    run's checkpoint gives (without the checkpoint's number and rows)."""
    import json

    from dreamerjax.run import api

    rows = api.evaluate(args.run_dir, args.episodes, mode=args.mode, video=args.video)
    for row in rows:
        print(json.dumps({k: row[k] for k in ("seed", "returns", "mean", "lengths")}))
    if "video" in rows[0]:
        print(f"wrote {rows[0]['video']}")
    return 0


def export_command(args: ExportArgs) -> int:
    from dreamerjax.run import policy

    path = policy.export(args.run_dir, args.seed, args.out)
    print(f"policy of seed {args.seed}: {path} ({path.stat().st_size:,} bytes)")
    return 0


def replay_command(args: ReplayArgs) -> int:
    if isinstance(args.command, ReplayExportArgs):
        from dreamerjax.run import replay_io
        lines = replay_io.export(args.command.run_dir, args.command.out)
    else:  # replay info reads chunks alone: the run layer is not imported
        from dreamerjax.data import replay_dir
        lines = replay_dir.describe(args.command.directory)
    for line in lines:
        print(line)
    return 0


def _demo(args: DemoArgs) -> int:
    import time

    started = time.monotonic()
    train = args.train_args().validate()
    code = train_command(train)
    if code != 0:
        return code
    from dreamerjax.run import rundir
    from dreamerjax.run.records import read_records

    run_dir = train.run_dir
    # the open-loop report: the run's last log point wrote it (run.report_every, or the
    # log point that reached the target)
    rundir.eval_artifacts(str(run_dir), report=False, video=run_dir / "episode.mp4")
    last = read_records(run_dir)[-1]
    print(demo_summary(last["eval_mean"], time.monotonic() - started, run_dir))
    return 0


def demo_summary(eval_mean: float, seconds: float, run_dir: Path) -> str:
    """The demo's last line: what was learned, how long it took, where the pictures are."""
    minutes, secs = divmod(round(seconds), 60)
    took = f"{minutes} min {secs} s" if minutes else f"{secs} s"
    what = ("CartPole learned" if eval_mean >= DEMO_LEARNED else
            f"CartPole not learned yet (learned reads {DEMO_LEARNED:.0f} or more)")
    return (f"{what}: evaluation return {eval_mean:.0f} (max 500, the steps the pole stays "
            f"up) after {took}; pictures in {run_dir}/ (curves.png, report/, episode.mp4)")


def envs_command(args: EnvsArgs) -> int:
    """`dreamerjax envs`: the suite registry, without importing any suite."""
    from dreamerjax.envs import registry

    if args.json:
        import json
        for entry in registry.listing():
            print(json.dumps(entry))
    else:
        print(registry.describe())
    return 0


def summary_command(args: SummaryArgs) -> int:
    from dreamerjax.tools import summary

    others, side = [], None
    try:
        records = summary.read_records(args.run_dir, args.seeds)
        result = summary.summarize(args.run_dir, args.rows, args.last, args.threshold,
                                   args.seeds)
        if args.against is not None:
            summary.summarize(args.against, last=1)  # its records exist and are complete
            others = [(args.against_label, summary.read_records(args.against))]
            side = summary.beside([(args.label, records), *others], args.metrics)
    except ValueError as e:
        raise ArgumentError(str(e)) from e
    print(summary.render(result, args.format, side, args.metrics), end="")
    if args.plot is not None:
        from dreamerjax.run.records import run_env
        from dreamerjax.viz import plots

        plots.plot_curves(records, args.plot,
                          run_env(args.run_dir), name=args.label, others=others,
                          statistic=(result.stat_rows, result.stat, result.threshold))
    return 0


def merge_command(args: MergeArgs) -> int:
    from dreamerjax.tools import merge

    try:
        done = merge.merge(args.run_dirs, args.out)
    except ValueError as e:
        raise ArgumentError(str(e)) from e
    print(f"[dreamerjax] merged seeds {done['seeds']} into {args.out}: "
          f"{done['records']} records, {done['episodes']} episodes")
    return 0


def parity_command(args: ParityArgs) -> int:
    from dreamerjax.tools.parity import main_parity
    return _code(main_parity(str(args.directory), args.strict))


def compare_command(args: CompareArgs) -> int:
    from dreamerjax.tools.protocol import compare_main
    return _code(compare_main(str(args.run_dir), _str_or_none(args.reference),
                              _str_or_none(args.out), seeds=None, smoke=args.smoke))


def bench_command(args: BenchArgs) -> int:
    from dreamerjax.tools import bench
    return _code(bench.main(args))


# Each subcommand's validated arguments -> the function that runs it (main calls it).
COMMANDS = {TrainArgs: train_command, EvalArgs: eval_command, InfoArgs: info_command,
            ExportArgs: export_command, ParityArgs: parity_command,
            CompareArgs: compare_command, SummaryArgs: summary_command,
            MergeArgs: merge_command, BenchArgs: bench_command, DemoArgs: _demo,
            EnvsArgs: envs_command, ReplayArgs: replay_command}

# Commands whose first JAX call is checked by main (require_backend); train checks after
# starting jax.distributed, bench in its own process set-up; the others need no backend.
STARTS_BACKEND = (EvalArgs, InfoArgs, ExportArgs, ParityArgs, ReplayArgs)


def parse(argv: Sequence[str] | None = None) -> Any:
    """Parse argv (default sys.argv[1:]) into one of the argument dataclasses."""
    return tyro.cli(Command, args=argv, prog="dreamerjax",
                    description="DreamerV3 in JAX: faithful to danijar/dreamerv3 @29eb964. "
                    "Every command also takes --import MODULE (repeatable): a module to "
                    "import first, e.g. one that registers envs.",
                    config=(tyro.conf.FlagCreatePairsOff,))


# Flags every command takes, read by main() before parsing: `--import MODULE` imports a
# module first (one that registers envs with dreamerjax.register_env), repeatable.
GLOBAL_FLAGS = ("--import",)


def _split_imports(argv: list[str]) -> tuple[list[str], list[str]]:
    """argv without its `--import MODULE` / `--import=MODULE` items, and the modules."""
    rest, modules, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--import" and i + 1 < len(argv):
            modules.append(argv[i + 1])
            i += 2
            continue
        if argv[i].startswith("--import="):
            modules.append(argv[i].split("=", 1)[1])
        else:
            rest.append(argv[i])
        i += 1
    return rest, modules


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: `dreamerjax <command> ...`; returns the exit status."""
    argv, imports = _split_imports(list(sys.argv[1:] if argv is None else argv))
    command = argv[0] if argv else ""
    owners = {"train": TrainArgs, "info": InfoArgs, "bench": BenchArgs}
    if command in owners:  # the reference's flag form: --run.train_ratio 32 -> --set ...
        from dreamerjax.config.keys import ConfigError
        from dreamerjax.config.resolve import rewrite_key_flags

        own = [f.name for f in dataclasses.fields(owners[command])] + ["help"]
        try:
            argv = [command, *rewrite_key_flags(argv[1:], own)]
        except ConfigError as e:
            print(f"dreamerjax {command}: error: {e}", file=sys.stderr)
            return 2
    if command == "train":
        try:
            check_flag_values(TrainArgs, argv[1:])
        except ArgumentError as e:  # a parse error, as tyro's: SystemExit(2)
            print(f"dreamerjax train: error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
    args = parse(argv)
    if isinstance(args, ParityArgs):  # data-parallel fixtures need their host devices
        import os

        from dreamerjax.tools.parity import host_devices_flags
        flags = host_devices_flags(str(args.directory), dict(os.environ))
        if flags is not None:
            os.environ["XLA_FLAGS"] = flags
    if opted_in(args, "xla_tuning"):  # before any JAX backend starts (parsing starts none)
        from dreamerjax.run import xla_tuning
        xla_tuning.apply()
    name = type(args).__name__.removesuffix("Args").lower()
    try:
        if imports:  # after the XLA options: a module may start JAX's backend
            from dreamerjax.run import api
            api.imported_modules(imports)
        args = args.validate()
        if type(args) in STARTS_BACKEND:  # train starts it after jax.distributed
            require_backend()
        return COMMANDS[type(args)](args)
    except ArgumentError as e:
        print(f"dreamerjax {name}: error: {one_line(e)}", file=sys.stderr)
        return 2
    except (ValueError, FloatingPointError, MemoryError) as e:
        # Bad input found by the implementation (unknown env, impossible config, a
        # checkpoint of another config, a replay too large, a non-finite loss, a run
        # directory another process writes): a message, not a traceback.
        print(f"dreamerjax {name}: error: {one_line(e)}", file=sys.stderr)
        return 3 if isinstance(e, FloatingPointError) else 2
    except OSError as e:
        # A write that failed (guard.WriteFailed: full disk, quota, read-only directory).
        print(f"dreamerjax {name}: error: {one_line(e)}", file=sys.stderr)
        return 4


def one_line(e: BaseException) -> str:
    """An error's message on one line (some list their problems one per line)."""
    return " ".join(str(e).split())


def console() -> None:
    """The `dreamerjax` executable (and `python -m dreamerjax.tools.cli`): main(), then
    the process ends as soon as its work is done (exit_now). main() itself returns, for
    callers in a process of their own."""
    exit_now(main())


def exit_now(code: int) -> None:
    """End the process with `code` as an interpreter's exit would, less its finalization:
    the threads that are not daemons joined, the atexit handlers run (the loggers'
    flush, jax.distributed's shutdown, ...) and stdout and stderr flushed, then os._exit.
    The finalization it skips frees each module's objects one by one, JAX's backend and
    its buffers among them: after a training run about 1 to 3 s on a CPU that the system
    does at once when the process ends (docs/performance.md, "Start-up, compile and the
    end of a run"). Every file of a run is closed by then (each is written in a `with`)."""
    import atexit
    import os
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing left to say there
            pass
    os._exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    console()
