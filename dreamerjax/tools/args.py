"""The arguments of the `dreamerjax` command: one frozen dataclass per subcommand (field
docstrings are its --help), each with the checks that need nothing compiled (`validate`),
and the one-line checks of flag values that run before tyro parses them. tools/cli.py
parses into these and runs the subcommand.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from dreamerjax.config.defaults import DEFAULT_SIZE, REFERENCES, SIZES, TWOHOT_MEANS, RunConfig

DEFAULT_ENV = RunConfig.env


class ArgumentError(ValueError):
    """Bad command-line input, found before anything is built or compiled."""


# ---------------------------------------------------------------------------------------
# Argument dataclasses


def _optional(typ: type, metavar: str, default: Any, note: str = "") -> Any:
    """An optional train flag whose None means "the config default, or the checkpoint's
    value with --resume"; --help shows that default instead of None."""
    hint = f"(default: {default}; with --resume: the checkpoint's{', ' + note if note else ''})"
    return Annotated[typ | None, tyro.conf.arg(metavar=metavar, help_behavior_hint=hint)]


def _path(metavar: str, hint: str) -> Any:
    return Annotated[Path | None, tyro.conf.arg(metavar=metavar, help_behavior_hint=hint)]


# --configs / --set / --config of train and info (dreamerjax.config.keys, docs/config.md).
_Configs = Annotated[tuple[str, ...], tyro.conf.arg(metavar="NAME [NAME ...]")]
_Sets = Annotated[tuple[str, ...], tyro.conf.UseAppendAction,
                  tyro.conf.arg(metavar="KEY=VALUE")]
_CONFIG_FLAGS = ("configs", "set", "config")


@dataclass(frozen=True)
class TrainArgs:
    """Train DreamerV3 on one environment; the seeds share one compiled program."""

    env: _optional(str, "STR", DEFAULT_ENV) = None
    """Environment id SUITE_TASK (a bare id is a gymnax task), e.g. CartPole-v1,
    gym_CartPole-v1, dmc_walker_walk; `dreamerjax envs` lists the suites."""
    size: _optional(str, "STR", DEFAULT_SIZE) = None
    """Model size preset: 1m, 12m, 25m, 50m, 100m, 200m, 400m (the named config size<S>,
    applied after --configs)."""
    configs: _Configs = ()
    """Named configs of the reference applied left to right: size12m ... size400m, atari,
    atari100k, crafter, dmc_proprio, dmc_vision, debug (and ours: size1m, tiny)."""
    set: _Sets = ()
    """Set a config key by the reference's dotted name, after --configs (repeatable; YAML
    values; regex keys such as '.*\\.units=256'), e.g. --set run.train_ratio=256.
    --run.train_ratio 256 is the same. Keys: docs/config.md."""
    config: _path("FILE", "(optional)") = None
    """A YAML or JSON file of dotted keys, or a run's config.json, applied first (before
    --configs)."""
    seeds: Annotated[tuple[int, ...] | None, tyro.conf.arg(
        metavar="INT [INT ...]",
        help_behavior_hint="(default: 0; with --resume: the checkpoint's)")] = None
    """Seeds to train in one compiled program (vmapped on accelerators, one host thread per
    seed on a CPU: run.seed_loop auto), e.g. --seeds 0 1 2."""
    steps: _optional(int, "INT", RunConfig.steps, "may grow") = None
    """Env rows per seed, summed over its envs (the protocol's N)."""
    eval_every: _optional(int, "INT", RunConfig.eval_every) = None
    """Rows between log points (eval, records, checkpoints); divides --steps, a multiple of
    --num-envs."""
    eval_episodes: _optional(int, "INT", RunConfig.eval_episodes) = None
    """Evaluation episodes per seed at each log point."""
    num_envs: _optional(int, "INT", RunConfig.num_envs) = None
    """Training envs per seed."""
    train_ratio: _optional(float, "FLOAT", RunConfig.train_ratio) = None
    """Replayed rows trained per env row (batch 16 x 64 and 512: one update per 2 rows)."""
    out: _path("DIR", "(required unless --resume)") = None
    """Run directory to create (new or empty)."""
    resume: _path("RUN_DIR", "(optional)") = None
    """Continue the run in this directory from its latest checkpoint."""
    target_return: Annotated[float | None, tyro.conf.arg(
        metavar="FLOAT", help_behavior_hint="(optional)")] = None
    """Stop at the first log point where every seed's evaluation mean return reaches this
    (after its checkpoint and open-loop report; --resume continues the run)."""
    devices: int = 1
    """Devices to shard the seed axis over; the number of seeds must be a multiple."""
    data_devices: _optional(int, "INT", 1) = None
    """Devices that train each seed's agent data-parallel (jax.train_devices): the seed's
    envs and batch split across them, gradients averaged. Uses --devices x N devices."""
    no_compile_cache: bool = False
    """Do not use the persistent XLA compilation cache."""
    no_precompile: bool = False
    """Compile in this process instead of a child that fills the compilation cache first
    (the child keeps XLA's compile peak out of the training process; docs/performance.md).
    DREAMERJAX_PRECOMPILE=0 does the same."""
    compile_here: bool = False
    """Precompile in this process instead: the run's programs compiled all at once on
    threads and run as compiled (the default where the devices open in one process at a
    time, a TPU; docs/performance.md)."""
    no_malloc_trim: bool = False
    """Do not hand glibc's freed heap back after compiles and before each chunk
    (DREAMERJAX_MALLOC_TRIM=0 does the same)."""
    no_xla_tuning: bool = False
    """Leave XLA_FLAGS as they are (otherwise one XLA:CPU option that makes the update
    faster is added; run/xla_tuning.py). DREAMERJAX_XLA_TUNING=0 does the same."""
    distributed: bool = False
    """Multi-host run: start jax.distributed first (cluster auto-detection, or the three
    options below); process 0 writes the run directory, which all processes must share."""
    coordinator: Annotated[str | None, tyro.conf.arg(
        metavar="HOST:PORT", help_behavior_hint="(with --distributed)")] = None
    """Address of process 0's coordinator, the same for every process."""
    num_processes: Annotated[int | None, tyro.conf.arg(
        metavar="INT", help_behavior_hint="(with --distributed)")] = None
    """Number of processes of the run."""
    process_id: Annotated[int | None, tyro.conf.arg(
        metavar="INT", help_behavior_hint="(with --distributed)")] = None
    """This process's index, 0 ... num_processes - 1."""
    checkpoint_every: _optional(int, "INT", RunConfig.checkpoint_every, "may change") = None
    """Log points between checkpoints; the last log point is always saved. 0: no
    checkpoints at all (the run cannot be resumed or evaluated)."""
    report_every: _optional(int, "INT", RunConfig.report_every, "may change") = None
    """Log points between the world model's open-loop reports (RUN_DIR/report, TensorBoard
    images); the last log point always has one. 0: never (run.report_every_logs)."""
    video_every: _optional(int, "INT", RunConfig.video_every, "may change") = None
    """Log points between evaluation videos: the first episode of each seed's evaluation
    as RUN_DIR/videos/seed_S/point_K.mp4, also to TensorBoard, W&B and MLflow where those
    outputs are on. 0: never, the default (run.video_every_logs)."""
    driver_parallel: bool = False
    """Host envs (gym_, atari_, dmc_, crafter_): step each env in its own worker process
    instead of in this process (run.driver_parallel; may change on --resume)."""
    replay_from: _path("DIR", "(optional)") = None
    """Fill the replay from this replay directory before training: chunk files of the
    reference (e3f0224 or 29eb964) or of `dreamerjax replay export`; seed S reads DIR/seed_S
    when DIR has seed folders, else every seed reads DIR; a run's directory stands for its
    replay/ folder (run.replay_from, docs/replay.md)."""
    offline: bool = False
    """With --replay-from: take no env step; the train-ratio schedule's updates of --steps
    rows run on the loaded rows (the evaluation still plays the env; run.offline)."""
    tiny: bool = False
    """Use the reference fixtures' tiny network (smoke runs; replaces the --size widths)."""
    cnn_mults: Annotated[tuple[int, ...] | None, tyro.conf.arg(
        metavar="INT [INT ...]", help_behavior_hint="(default: 1 2 3 4 4)")] = None
    """Image observations: depth multiplier of each conv stage of the encoder and decoder
    (the first keeps the resolution, each further halves it); e.g. 1 2 for MinAtar."""
    cnn_minres: _optional(int, "INT", 4) = None
    """Image observations: resolution after the last conv stage; e.g. 5 for MinAtar's
    10 x 10 images with --cnn-mults 1 2."""
    twohot_mean: Annotated[Literal[TWOHOT_MEANS] | None, tyro.conf.arg(
        metavar="{exact,pairsum}", help_behavior_hint="(default: exact)")] = None
    """Summation of the reward and value heads' two-hot expectation: exact (mirror
    difference) or pairsum (the reference's order, with its rounding noise; for studying
    that noise, docs/deviations.md D1)."""
    reference: Annotated[Literal[REFERENCES] | None, tyro.conf.arg(
        metavar="{29eb964,e3f0224}", help_behavior_hint="(default: 29eb964)")] = None
    """The reference version whose numbers the agent reproduces: danijar/dreamerv3 at
    29eb964 or at e3f0224 (its HEAD); keys and named configs take that version's spelling
    (config key `reference`, docs/config.md)."""

    def run_overrides(self) -> dict[str, Any]:
        """The RunConfig fields given on the command line (None = not given)."""
        given = dict(env=self.env, steps=self.steps, eval_every=self.eval_every,
                     eval_episodes=self.eval_episodes, num_envs=self.num_envs,
                     train_ratio=self.train_ratio, checkpoint_every=self.checkpoint_every,
                     report_every=self.report_every, video_every=self.video_every)
        return {k: v for k, v in given.items() if v is not None}

    @property
    def run_dir(self) -> Path:
        """The run directory: --resume if given, else --out."""
        path = self.resume if self.resume is not None else self.out
        assert path is not None, "validate() first"
        return path

    def validate(self) -> TrainArgs:
        """Raise ArgumentError on input that cannot run. Returns the arguments with env and
        size resolved to their defaults for a new run (left None with --resume, where the
        checkpoint's apply)."""
        _check_train_dirs(self)
        _check_train_values(self)
        # --set may change a resumed run's resumable keys (resume_config checks which).
        given = [f"--{n}" for n in _CONFIG_FLAGS if getattr(self, n)]
        refused = [f"--{n}" for n in _CONFIG_FLAGS if n != "set" and getattr(self, n)]
        if self.resume is not None and refused:
            raise ArgumentError(f"{refused[0]} cannot change a run on --resume (the run's "
                                f"config applies); start a new run from it with --config "
                                f"{Path(self.resume) / 'config.json'} --out NEW_DIR")
        if self.resume is None:
            # The config's values and the seeds are checked once, by the run's plan
            # (preflight), after the flags that may change a resumed run are applied.
            if not given:  # without configs, these are the values the defaults give
                return dataclasses.replace(self, env=self.env or DEFAULT_ENV,
                                           size=self.size or DEFAULT_SIZE,
                                           seeds=self.seeds or (0,))
            return dataclasses.replace(self, seeds=self.seeds or (0,))
        return self


def _check_train_dirs(args: TrainArgs) -> None:
    """--out names a new (empty) run directory, or --resume a run no one else writes and
    that did not stop at a non-finite loss; not both."""
    if args.resume is None and args.out is None:
        raise ArgumentError("--out RUN_DIR is required (or --resume RUN_DIR)")
    if args.resume is not None:
        if args.out is not None and Path(args.out).absolute() != Path(
                args.resume).absolute():
            raise ArgumentError("give either --out (a new run) or --resume (an existing "
                                "run), not both")
        if not Path(args.resume).is_dir():
            raise ArgumentError(f"--resume {args.resume}: no such run directory")
        from dreamerjax.run import (
            lock as runlock,  # no JAX: the checks of a run directory's state
        )
        runlock.check(args.resume, "--resume")
        runlock.check_not_nonfinite(args.resume)
    # Processes of a multi-host run share --out; only process 0 (or, with cluster
    # auto-detection, none) can tell it must be empty before the others write.
    elif not args.distributed or args.process_id == 0:
        _check_new_run_dir(Path(args.out))


def _check_train_values(args: TrainArgs) -> None:
    """What is not a config value: flag combinations, the processes and devices of the run
    (the config's values and the seeds are checked once, by the run's plan: preflight)."""
    _check_limits(args)
    _check_distributed(args)
    if args.devices <= 0:
        raise ArgumentError(f"--devices must be positive, got {args.devices}")
    if args.data_devices is not None and args.data_devices <= 0:
        raise ArgumentError(f"--data-devices must be positive, got {args.data_devices}")
    if args.target_return is not None and not math.isfinite(args.target_return):
        raise ArgumentError(f"--target-return must be a finite number, got "
                            f"{args.target_return}")
    if args.seeds is not None and len(args.seeds) % args.devices:
        raise ArgumentError(
            f"{len(args.seeds)} seeds cannot be split evenly over {args.devices} devices")


@dataclass(frozen=True)
class EvalArgs:
    """Evaluate a run's checkpoints (the latest, a chosen one, or every kept one) or a
    policy file written by `dreamerjax export`."""

    run_dir: tyro.conf.Positional[Path]
    """Run directory (written by `dreamerjax train`), one of its checkpoints,
    RUN/checkpoints/K, or a policy file (FILE.npz, written by `dreamerjax export`)."""
    checkpoint: str = "latest"
    """A kept checkpoint's number K (RUN/checkpoints/K), latest, or all (one evaluation per
    kept checkpoint, oldest first)."""
    plot: _path("FILE", "(optional)") = None
    """Also draw the evaluation return of each evaluated checkpoint against rows (a .png)."""
    episodes: int = 10
    """Evaluation episodes per seed."""
    mode: Literal["sample", "mode"] = "sample"
    """Act with samples of the policy (as training's evaluation) or with its mode."""
    report: bool = False
    """Also write the world model's open-loop report (RUN_DIR/report/openl_*)."""
    video: Annotated[Path | None, tyro.conf.arg(metavar="FILE.mp4|FILE.gif")] = None
    """Render one evaluation episode of the first seed to this video file."""

    def validate(self) -> EvalArgs:
        from dreamerjax.run.checkpoint import split_checkpoint_path

        inside = split_checkpoint_path(self.run_dir)
        if inside is not None:  # RUN/checkpoints/K
            if self.checkpoint not in ("latest", str(inside[1])):
                raise ArgumentError(f"--checkpoint {self.checkpoint}: {self.run_dir} is "
                                    f"checkpoint {inside[1]} already")
            self = dataclasses.replace(self, run_dir=inside[0], checkpoint=str(inside[1]))
        if self.run_dir.is_file():  # a policy file: one seed's parameters, nothing else
            for flag, given in (("--checkpoint", self.checkpoint != "latest"),
                                ("--report", self.report), ("--plot", self.plot is not None)):
                if given:
                    raise ArgumentError(
                        f"{flag}: {self.run_dir} is a policy file (one checkpoint's "
                        "parameters, no world-model report or training rows); give "
                        "its run directory instead")
        else:
            _check_existing_run_dir(self.run_dir)
        if self.checkpoint not in ("latest", "all") and not self.checkpoint.isdigit():
            raise ArgumentError(f"--checkpoint {self.checkpoint}: give a checkpoint's number, "
                                "latest or all")
        if self.plot is not None and self.plot.suffix.lower() != ".png":
            raise ArgumentError(f"--plot {self.plot}: must name a .png file")
        if self.episodes <= 0:
            raise ArgumentError(f"--episodes must be positive, got {self.episodes}")
        if self.video is not None and self.video.suffix.lower() not in (".mp4", ".gif"):
            raise ArgumentError(f"--video {self.video}: use a .mp4 or .gif file name")
        return self


@dataclass(frozen=True)
class InfoArgs:
    """Print the resolved config and the parameter counts of each network."""

    env: _optional(str, "STR", DEFAULT_ENV) = None
    """Environment id SUITE_TASK (as for train)."""
    size: _optional(str, "STR", DEFAULT_SIZE) = None
    """Model size preset: 1m, 12m, 25m, 50m, 100m, 200m, 400m."""
    configs: _Configs = ()
    """Named configs applied left to right (as for train)."""
    set: _Sets = ()
    """Set a config key by its dotted name (as for train; repeatable)."""
    config: _path("FILE", "(optional)") = None
    """A YAML or JSON file of dotted keys, or a run's config.json (as for train)."""
    tiny: bool = False
    """Use the reference fixtures' tiny network."""
    cnn_mults: tuple[int, ...] | None = None
    """Image observations: depth multiplier of each conv stage (as for train)."""
    cnn_minres: int | None = None
    """Image observations: resolution after the last conv stage (as for train)."""
    reference: Annotated[Literal[REFERENCES] | None, tyro.conf.arg(
        metavar="{29eb964,e3f0224}", help_behavior_hint="(default: 29eb964)")] = None
    """The reference version whose numbers the agent reproduces: danijar/dreamerv3 at
    29eb964 or at e3f0224 (its HEAD); keys and named configs take that version's spelling
    (config key `reference`, docs/config.md)."""

    def validate(self) -> InfoArgs:
        resolve_args(self, check=False)  # the layers; the values are checked by info's plan
        return self


@dataclass(frozen=True)
class ExportArgs:
    """Write one seed's trained policy (parameters and config; no replay, no optimiser state)
    to a .npz file that `dreamerjax.load_policy` reads."""

    run_dir: tyro.conf.Positional[Path]
    """Run directory (written by `dreamerjax train`)."""
    out: Annotated[Path, tyro.conf.arg(metavar="FILE.npz")]
    """The policy file to write."""
    seed: int = 0
    """Which of the run's seeds."""

    def validate(self) -> ExportArgs:
        _check_existing_run_dir(self.run_dir)
        if Path(self.out).suffix != ".npz":
            raise ArgumentError(f"--out {self.out}: a policy file ends in .npz")
        return self


@dataclass(frozen=True)
class ParityArgs:
    """Check our networks and update against the reference fixtures, number for number."""

    directory: tyro.conf.Positional[Path | None] = None
    """Fixture directory: tests/data/reference of a dreamerjax checkout (the default when
    run from one); an installed package does not hold the fixtures."""
    strict: bool = False
    """Fail on every tolerance breach, including the ones marked as known."""

    def validate(self) -> ParityArgs:
        if self.directory is not None and Path(self.directory).is_dir():
            return self
        from dreamerjax.tools.parity import default_fixtures, fixtures_hint

        if self.directory is not None:
            raise ArgumentError(f"{self.directory}: no such fixture directory; "
                                f"{fixtures_hint()}")
        found = default_fixtures()
        if found is None:
            raise ArgumentError(f"give the fixture directory: {fixtures_hint()}")
        return dataclasses.replace(self, directory=found)


@dataclass(frozen=True)
class CompareArgs:
    """Run the pre-registered CartPole comparison on a run (and the reference's, if given)."""

    run_dir: tyro.conf.Positional[Path]
    """Our run directory (records.jsonl, episodes.jsonl, config.json)."""
    reference: Path | None = None
    """Directory of the reference runs (ref_s{seed}/records.jsonl ...)."""
    out: Path | None = None
    """Where compare.md, summary.json and compare.png go (default: the run directory,
    whose own curves.png stays as training drew it)."""
    smoke: bool = False
    """Smoke mode: short runs, only the structural checks."""

    def validate(self) -> CompareArgs:
        _check_existing_run_dir(self.run_dir)
        if self.reference is not None and not Path(self.reference).is_dir():
            raise ArgumentError(f"--reference {self.reference}: no such directory")
        return self



def _run_names(run: Path, other: Path) -> tuple[str, str]:
    """Two runs' names for a table: their folders' names, or with the parent folder
    when those are the same (a/run and b/run -> a/run, b/run)."""
    run, other = Path(run).resolve(), Path(other).resolve()
    if run.name != other.name:
        return run.name, other.name
    return f"{run.parent.name}/{run.name}", f"{other.parent.name}/{other.name}"

@dataclass(frozen=True)
class SummaryArgs:
    """Print what a run learned, re-derived from its records: the evaluation return per
    seed at every log point, and the mean over seeds of each seed's mean at the last
    log points (the protocol's S1 for any run)."""

    run_dir: tyro.conf.Positional[Path]
    """Run directory (or a results folder) with records.jsonl."""
    rows: tuple[int, ...] | None = None
    """Log points (rows) the statistic averages, e.g. --rows 16000 18000 20000 (default:
    the last --last log points)."""
    last: int = 3
    """Number of final log points the statistic averages when --rows is not given."""
    seeds: tuple[int, ...] | None = None
    """Only these seeds of RUN_DIR, in the table, statistic and plot (default: all)."""
    threshold: float | None = None
    """Print whether the statistic is at or above this value."""
    format: Literal["markdown", "json"] = "markdown"
    """Output: a Markdown table (a results README's) or one JSON object."""
    plot: _path("FILE", "(optional)") = None
    """Also draw the returns per seed and their mean against rows into this PNG."""
    against: _path("RUN", "(optional)") = None
    """A second run (or results folder) beside this one, e.g. the reference's: a table of
    both runs per log point and shared seed (and its curves with --plot)."""
    metrics: tuple[str, ...] = ()
    """With --against: train metrics to put beside, by their records' names, e.g.
    --metrics val/mean ent/action/mean."""
    label: str | None = None
    """The name for RUN_DIR in the table and the legend (default: its folder's name)."""
    against_label: str | None = None
    """With --against: the name for RUN (default: its folder's name)."""

    def validate(self) -> SummaryArgs:
        _check_existing_run_dir(self.run_dir)
        if self.against is not None:
            _check_existing_run_dir(self.against)
            mine, theirs = _run_names(self.run_dir, self.against)
            self = dataclasses.replace(self, label=self.label or mine,
                                       against_label=self.against_label or theirs)
            if self.against_label == self.label:
                raise ArgumentError(f"--against-label {self.against_label}: the same as "
                                    "--label (the table needs two names)")
        elif self.metrics:
            raise ArgumentError("--metrics: needs --against RUN (the metrics go beside it)")
        else:
            self = dataclasses.replace(self, label=self.label or Path(self.run_dir).resolve().name)
        if self.plot is not None and self.plot.suffix.lower() != ".png":
            raise ArgumentError(f"--plot {self.plot}: must name a .png file")
        if self.plot is not None and not self.plot.parent.is_dir():
            raise ArgumentError(f"--plot {self.plot}: folder {self.plot.parent} does not exist")
        if self.last < 1:
            raise ArgumentError(f"--last {self.last}: must be at least 1")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise ArgumentError(f"--threshold {self.threshold}: must be a finite number")
        return self


@dataclass(frozen=True)
class MergeArgs:
    """Join runs that trained different seeds of one config (one process or machine each)
    into one folder that summary and compare read as a run: records, episodes and config
    with every seed."""

    run_dirs: tyro.conf.Positional[tuple[Path, ...]]
    """The runs, e.g. runs/acrobot_s0 runs/acrobot_s1 (configs equal apart from --seeds)."""
    out: Annotated[Path, tyro.conf.arg(metavar="DIR")]
    """The folder to write config.json, records.jsonl and episodes.jsonl into (each is
    replaced)."""

    def validate(self) -> MergeArgs:
        if not self.run_dirs:
            raise ArgumentError("merge needs at least one RUN_DIR")
        for run in self.run_dirs:
            _check_existing_run_dir(run)
        if Path(self.out).exists() and not Path(self.out).is_dir():
            raise ArgumentError(f"--out {self.out} exists and is not a directory")
        return self


@dataclass(frozen=True)
class BenchArgs:
    """Time the run's update through the programs `train` compiles; prints figures (never
    asserts a speed)."""

    json: bool = False
    """Print one JSON object instead of a table."""
    seeds: Annotated[tuple[int, ...] | None, tyro.conf.arg(
        metavar="INT [INT ...]",
        help_behavior_hint="(default: 1 3; with --tiny: 1; with --sweep: 1 4 16)")] \
        = None
    """Numbers of seeds to time in one run (seeds 0 ... n - 1: vmapped on accelerators, one
    host thread per seed on a CPU, as `train` runs them), e.g. --seeds 1 3."""
    updates: int = 50
    """Timed updates per configuration at least (3 timed chunks at least)."""
    warmup: int = 3
    """Untimed updates before the timed ones at least (after the replay's gate)."""
    set: _Sets = ()
    """Set a config key of the benched update by its dotted name, e.g. --set
    jax.compute_dtype=bfloat16 (repeatable; with --env it applies to both runs)."""
    tiny: bool = False
    """Bench the tiny network instead of 1m: a smoke check of the bench itself (one seed
    count, its programs compiled once in this process unless --seeds or --compile say
    otherwise)."""
    size: str = DEFAULT_SIZE
    """Model size preset of the benched config (config.SIZES)."""
    compile: Literal["auto", "in-process", "children"] = "auto"
    """Where compile time is measured: in-process (this process, no persistent cache), or
    children (also cold and warm figures from two fresh processes and a persistent cache;
    a CPU only). auto: children on a CPU, in-process on accelerators and with --tiny."""
    sweep: bool = False
    """Time every point of --sizes x --dtypes x --seeds in this process, one JSON line per
    point as it finishes (also appended to --out FILE.jsonl; run again to go on)."""
    sizes: tuple[str, ...] = ("1m", "12m", "50m", "200m")
    """With --sweep: model size presets."""
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    """With --sweep: compute dtypes (jax.compute_dtype)."""
    budget: Annotated[float | None, tyro.conf.arg(
        metavar="SECONDS", help_behavior_hint="(optional)")] = None
    """With --sweep: start no new point after this many seconds (a point under way
    finishes; run the same command again to go on)."""
    out: _path("PATH", "(default: stdout only)") = None
    """Where the figures are also written: a .json file, or a folder for
    bench_<backend>_<date>.json and its README.md table (with --env: env_<id>_<date>.json;
    with --sweep: a .jsonl file, appended to)."""
    env: Annotated[str | None, tyro.conf.arg(metavar="ID", help_behavior_hint="(optional)")] \
        = None
    """Time a whole run of this env (host ids too: gym_CartPole-v1, atari100k_pong) with
    the protocol's schedule: acting rows/s and updates/s (docs/performance.md)."""
    compiled: Annotated[str | None, tyro.conf.arg(
        metavar="ID", help_behavior_hint="(default: gym_X's gymnax X if any)")] = None
    """With --env: the compiled env whose run is timed alongside ('' for none)."""
    stretch: int = 5
    """Ticks per chunk, the benched run's log interval (16 envs: 8 updates a tick)."""
    rounds: int = 3
    """With --env: timed chunks after the replay's gate (0: acting alone, no updates)."""
    num_envs: int = 16
    """With --env: envs of the run."""

    def validate(self) -> BenchArgs:
        if self.size not in SIZES:
            raise ArgumentError(f"--size {self.size!r}: known sizes are {', '.join(SIZES)}")
        if self.stretch <= 0:
            raise ArgumentError(f"--stretch must be positive, got {self.stretch}")
        if self.env is not None:
            _check_bench_sets(self.set)  # both runs' config (bench.env_config)
            if self.rounds < 0 or self.num_envs <= 0:
                raise ArgumentError("--num-envs must be positive, --rounds >= 0")
            from dreamerjax import envs
            for env in (self.env, self.compiled or None):
                if env is None:
                    continue
                try:
                    envs.parse_env_id(env)
                except ValueError as e:
                    raise ArgumentError(f"--env {env!r}: {e}") from e
            return self
        if self.seeds is not None and (not self.seeds or any(n <= 0 for n in self.seeds)):
            raise ArgumentError(f"--seeds takes positive seed counts, got {self.seeds}")
        if self.updates <= 0:
            raise ArgumentError(f"--updates must be positive, got {self.updates}")
        if self.warmup < 0:
            raise ArgumentError(f"--warmup must be >= 0, got {self.warmup}")
        if self.sweep:
            bad = [s for s in self.sizes if s not in SIZES]
            if bad:
                raise ArgumentError(f"--sizes {bad[0]!r}: known sizes are {', '.join(SIZES)}")
            bad = [d for d in self.dtypes if d not in ("float32", "bfloat16")]
            if bad:
                raise ArgumentError(f"--dtypes {bad[0]!r}: float32 or bfloat16")
            if self.out is not None and not str(self.out).endswith(".jsonl"):
                raise ArgumentError(f"--out {self.out}: with --sweep a .jsonl file (one line "
                                    "per point, appended to)")
        elif self.budget is not None:
            raise ArgumentError("--budget is for --sweep")
        if self.compile == "children" and self.sweep:
            raise ArgumentError("--compile children: --sweep compiles in its own process "
                                "(--compile in-process or auto)")
        _check_bench_sets(self.set)
        return self


def _check_bench_sets(sets: tuple[str, ...]) -> None:
    """The --set items' keys and types on the default config, checked before JAX starts
    (one line naming the key); their values are checked once, by the benched run's plan."""
    from dreamerjax.config import keys as configs
    from dreamerjax.config.resolve import make_config
    try:  # resolved as the benched config is (tools/bench/programs.point_config)
        make_config(sets=sets, check=False)
    except configs.ConfigError as e:
        raise ArgumentError(config_line(e)) from e


# The demo's run settings, in one place (how they were chosen: results/demo_sweep/). The
# agent is the reference's 1m agent, every hyperparameter of it; only the run differs from
# the CartPole protocol's (batch 16 x 64, train ratio 512, 16 envs): 8 replayed windows of
# 16 rows at train ratio 64, so an update still comes every 2 env rows but costs a small
# part of the protocol's on a CPU; and the run ends at the first log point whose
# evaluation shows learning (DEMO_LEARNED), so a draw that learns early ends early.
DEMO_RUN: dict[str, Any] = dict(
    env=DEFAULT_ENV, size="1m", steps=6400, eval_every=320, eval_episodes=5, num_envs=8,
    train_ratio=64.0, set=("batch_size=8", "batch_length=17"),
    report_every=1000)  # the open-loop report where the run ends only
DEMO_LEARNED = 150.0  # an evaluation return (CartPole's maximum is 500) that shows learning


@dataclass(frozen=True)
class DemoArgs:
    """CartPole on a CPU: the reference's agent (1m model) with the demo's run settings
    (DEMO_RUN: batch 8 x 16, train ratio 64, 8 envs), trained until its evaluation
    return reaches 150 (at most 6,400 rows); curves, the world model's open-loop report and
    a video of the trained policy."""

    out: Path = Path("runs/demo")
    """Run directory to create (must be new or empty)."""
    seed: int = 0
    """Seed of the run (another seed is another draw, as another machine is)."""
    steps: int = DEMO_RUN["steps"]
    """Env rows at most (a multiple of 320); the run ends earlier once learned."""
    tiny: bool = False
    """Use the tiny network (faster, learns less)."""

    def train_args(self) -> TrainArgs:
        # compiled in this process: a 1m model's compile peak is small, and a child that
        # compiles first would only add its start-up to a newcomer's wait
        return TrainArgs(**{**DEMO_RUN, "steps": self.steps}, seeds=(self.seed,),
                         out=self.out, tiny=self.tiny, target_return=DEMO_LEARNED,
                         no_precompile=True)

    def validate(self) -> DemoArgs:
        self.train_args().validate()
        return self


@dataclass(frozen=True)
class EnvsArgs:
    """List the environment suites (env ids are SUITE_TASK): which are installed, and the
    command that installs each of the others."""

    json: bool = False
    """Print one JSON object per suite instead of the table."""

    def validate(self) -> EnvsArgs:
        return self


@dataclass(frozen=True)
class ReplayInfoArgs:
    """What a replay directory holds: its format (e3f0224 or 29eb964), streams, rows and
    chunk files, and a row's keys with their shapes and dtypes."""

    directory: tyro.conf.Positional[Path]
    """A folder of chunk files (a reference run's logdir/replay), or of seed_<S> folders
    of them (what `dreamerjax replay export` writes, a run's RUN/replay), or a run's
    directory (its replay/ folder is read)."""

    def validate(self) -> ReplayInfoArgs:
        return self


@dataclass(frozen=True)
class ReplayExportArgs:
    """Write a run's replay as chunk files, one seed_<S> folder per seed: from the run's
    own chunk folders, else from its latest checkpoint's replay. The run is not changed."""

    run_dir: tyro.conf.Positional[Path]
    """Run directory (written by `dreamerjax train`)."""
    out: Annotated[tyro.conf.Positional[Path], tyro.conf.arg(metavar="DIR")]
    """A new or empty directory, outside the run directory."""

    def validate(self) -> ReplayExportArgs:
        _check_existing_run_dir(self.run_dir)
        return self


@dataclass(frozen=True)
class ReplayArgs:
    """Replay directories in the reference's chunk format: `replay info DIR`,
    `replay export RUN DIR`."""

    command: Annotated[Annotated[ReplayInfoArgs, tyro.conf.subcommand("info")]
                       | Annotated[ReplayExportArgs, tyro.conf.subcommand("export")],
                       tyro.conf.OmitSubcommandPrefixes]

    def validate(self) -> ReplayArgs:
        return dataclasses.replace(self, command=self.command.validate())


Command = (
    Annotated[TrainArgs, tyro.conf.subcommand("train")]
    | Annotated[EvalArgs, tyro.conf.subcommand("eval")]
    | Annotated[InfoArgs, tyro.conf.subcommand("info")]
    | Annotated[ExportArgs, tyro.conf.subcommand("export")]
    | Annotated[ParityArgs, tyro.conf.subcommand("parity")]
    | Annotated[CompareArgs, tyro.conf.subcommand("compare")]
    | Annotated[SummaryArgs, tyro.conf.subcommand("summary")]
    | Annotated[MergeArgs, tyro.conf.subcommand("merge")]
    | Annotated[BenchArgs, tyro.conf.subcommand("bench")]
    | Annotated[DemoArgs, tyro.conf.subcommand("demo")]
    | Annotated[EnvsArgs, tyro.conf.subcommand("envs")]
    | Annotated[ReplayArgs, tyro.conf.subcommand("replay")]
)


# ---------------------------------------------------------------------------------------
# Checks


def config_line(e: Exception, args=None) -> str:
    """A ConfigError's one line as the command line says it: the flag given first
    (_flag_first) and its fix in flags (`; pass --eval-every 400`)."""
    from dreamerjax.config import keys as configs

    if not isinstance(e, configs.ConfigError):
        return str(e)
    message = e.problem if args is None else _flag_first(e.problem, args)
    return message + configs.fix_text(e.fix, configs.cli_spelling)


def _flag_first(message: str, args) -> str:
    """A config check's one line on a key that a flag given on the command line set,
    with that flag first (the key stays named): '--steps: run.steps: must be positive'."""
    import re

    from dreamerjax.config import keys as configs

    key = message.split(":", 1)[0]
    names = {**configs.FLAG_KEYS, "seeds": "seeds"}
    for name, pattern in names.items():
        if _given(getattr(args, name, None)) and re.fullmatch(pattern, key):
            return f"--{name.replace('_', '-')}: {message}"
    return message


def _check_distributed(args) -> None:
    given = [n for n in ("coordinator", "num_processes", "process_id")
             if getattr(args, n) is not None]
    if given and not args.distributed:
        raise ArgumentError(f"--{given[0].replace('_', '-')} needs --distributed")
    if args.num_processes is not None and args.num_processes <= 0:
        raise ArgumentError(f"--num-processes must be positive, got {args.num_processes}")
    if args.process_id is not None and not (
            0 <= args.process_id < (args.num_processes or args.process_id + 1)):
        raise ArgumentError(f"--process-id {args.process_id} is not in 0 ... "
                            f"{(args.num_processes or 1) - 1}")


# Upper bounds of the flags that are not config values (those are config_validate.validate's).
LIMITS = {"devices": 2**16, "num_processes": 2**16, "process_id": 2**16 - 1}


def _check_limits(args) -> None:
    for name, limit in LIMITS.items():
        value = getattr(args, name, None)
        if value is not None and value > limit:
            raise ArgumentError(f"--{name.replace('_', '-')} {value}: at most {limit}")


def _flag_kinds(cls) -> dict[str, tuple[str, Any]]:
    """--flag -> (kind, type) of a dataclass's fields: ("bool", None), ("one", int | float
    | str | Path), ("many", element type), ("choice", choices)."""
    import types
    import typing

    hints = typing.get_type_hints(cls, include_extras=True)
    out = {}
    for field in dataclasses.fields(cls):
        t = hints[field.name]
        while typing.get_origin(t) is Annotated:
            t = typing.get_args(t)[0]
        if typing.get_origin(t) in (typing.Union, types.UnionType):
            t = next(a for a in typing.get_args(t) if a is not type(None))
        if t is bool:
            kind = ("bool", None)
        elif typing.get_origin(t) is tuple:
            kind = ("many", typing.get_args(t)[0])
        elif typing.get_origin(t) is Literal:
            kind = ("choice", typing.get_args(t))
        else:
            kind = ("one", t)
        out["--" + field.name.replace("_", "-")] = kind
        out["--" + field.name] = kind
    return out


def check_flag_values(cls, argv: Sequence[str]) -> None:
    """ArgumentError (one line, naming the flag) for a value of the wrong type, an empty
    value, a missing value or an unknown flag: tyro's own messages are multi-line boxes."""
    kinds = _flag_kinds(cls)
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("--") or token == "--help":
            continue
        flag, eq, inline = token.partition("=")
        if flag not in kinds:
            import difflib  # the closest names, as config/resolve.py gives a mistyped key

            spelled = [k for k in kinds if "_" not in k]  # each flag once, as --help shows it
            close = difflib.get_close_matches(flag.replace("_", "-"), spelled, n=3, cutoff=0.6)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise ArgumentError(f"unknown flag {flag} (see --help){hint}")
        kind, typ = kinds[flag]
        values = [inline] if eq else []
        while not eq and i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        if kind == "bool":
            if values:
                raise ArgumentError(f"{flag} takes no value, got {values[0]!r}")
            continue
        if not values:
            raise ArgumentError(f"{flag} needs a value")
        if kind != "many" and len(values) > 1:
            raise ArgumentError(f"{flag} takes one value, got {' '.join(values)!r}")
        for value in values:
            _check_flag_value(flag, kind, typ, value)


def _check_flag_value(flag: str, kind: str, typ: Any, value: str) -> None:
    if not value.strip():
        raise ArgumentError(f"{flag} must not be empty")
    if kind == "choice":
        if value not in typ:
            raise ArgumentError(f"{flag} {value!r}: choose one of {', '.join(typ)}")
        return
    if typ is int:
        try:
            int(value)
        except ValueError:
            raise ArgumentError(f"{flag} {value!r}: not an integer") from None
    elif typ is float:
        try:
            float(value)
        except ValueError:
            raise ArgumentError(f"{flag} {value!r}: not a number") from None
    elif typ is Path and "\0" in value:
        raise ArgumentError(f"{flag} {value!r}: not a path")


def _check_new_run_dir(path: Path) -> None:
    from dreamerjax.run import lock as runlock  # no JAX: the library's own check

    try:
        runlock.check_new(path, "--out", resume=f"--resume {path}")
    except runlock.RunDirNotEmpty as e:
        raise ArgumentError(str(e)) from None


def _check_existing_run_dir(path: Path) -> None:
    if not Path(path).is_dir():
        raise ArgumentError(f"{path}: no such run directory")



def resolve_args(args: TrainArgs | InfoArgs, check: bool = True):
    """(Config, provenance) of a new run: defaults < --config < --configs < --set < flags
    (config_resolve.resolve), validated unless check=False (a run's plan validates it);
    ArgumentError naming the key or flag."""
    from dreamerjax.config import keys as configs
    from dreamerjax.config import resolve as config_resolve

    flags = {name: getattr(args, name, None) for name in configs.FLAG_KEYS}
    # A switch is on, or not given.
    flags["driver_parallel"] = True if flags["driver_parallel"] else None
    flags["offline"] = True if flags["offline"] else None
    if flags["replay_from"] is not None:
        flags["replay_from"] = str(flags["replay_from"])
    try:
        return config_resolve.resolve(args.configs, args.set, args.config, size=args.size,
                               tiny=args.tiny, check=check, **flags)
    except configs.ConfigError as e:
        raise ArgumentError(config_line(e, args)) from e


def config_from_args(args: TrainArgs | InfoArgs):
    """The Config of a new run from its flags."""
    return resolve_args(args)[0]


def _given_flags(args: TrainArgs) -> dict[str, Any]:
    """The run-defining flags given on the command line (a switch counts when on)."""
    from dreamerjax.config import keys as configs

    names = ("size", "seeds", "tiny", *configs.FLAG_KEYS)
    return {n: getattr(args, n) for n in names if _given(getattr(args, n))}


def _given(value: Any) -> bool:
    """A flag's value as given: not None, and a switch only when on (0 is a value)."""
    return value is not None and value is not False
