"""`dreamerjax bench`: what the 1m CartPole run's update costs on this machine, timed
through the programs `dreamerjax train` compiles. The same code on a CPU, GPU and TPU.

What is timed (measure_point), for each number of seeds of --seeds:

- the run's own programs: the benched config (CartPole, the protocol's schedule: 16 envs,
  train ratio 512, batch 16 x 64, at --size or tiny, --set items applied) goes through
  the run's plan (run/plan.make_plan: seeds 0 ... n - 1, the seed loop resolved for the
  backend, the replay's memory checked) and trainer (run/trainers.make_trainer); its
  state comes from the seeds' train keys (run/streams.py) and its chunks are called as
  `train` calls them (trainer.chunk), the updates each owes from the run's schedule. A
  chunk is one log interval of --stretch ticks (the chunk's scan length; its program is
  otherwise the run's).
- compile: the trainer's chunk and init lowered and compiled ahead of their first call
  (trace, lower, compile), in this process (--compile in-process, the default off a CPU
  and with --tiny) or, on a CPU by default (--compile children), also in a fresh process
  against an empty persistent cache (cold) and in a second one against the cache the
  first filled (warm), so no in-memory cache counts. --tiny is the bench's smoke check:
  one seed count (--seeds 1) whose programs compile once, in this process.
- seconds per update: the chunks past the replay's gate and --warmup, each timed to
  block_until_ready, divided by the updates it owed (its ticks' acting included: a tick
  acts once and trains 8 times); the median over the timed chunks (3 at least). Per
  seed: divided by the seeds too. Rows per second of acting alone: the chunks before
  the gate, which owe no updates.
- FLOPs per update (one seed): the update program (loop.train_once) lowered with every
  lax.scan unrolled (XLA's cost analysis counts a rolled loop's body once), counted by
  the backend's cost analysis where it gives one, else by the CPU's (the TPU and GPU
  plugins give none of a lowered program); `flops_source` says which. `flops_analytic`
  is a hand count of the dense matmuls as a cross-check. Achieved FLOP/s = FLOPs x seeds
  / seconds per update; the fraction of the device's peak where the peak is known
  (tools/accelerators.py), and `efficiency` = achieved / the float32 matmul peak
  measured in this process.
- memory: the run's state (its abstract shapes) and the compiled chunk (XLA's memory
  analysis) against the memory free on the device (run/memory.available); a point that
  does not fit is refused (DoesNotFit) before anything is allocated for it.
- the open-loop report's pictures (viz/report.write_openl, the host's part of a log
  point's report) for a vector observation as wide as Craftax-Symbolic's (1,345
  dimensions; a [16, 64] batch of random truth and a noisy prediction): seconds to draw,
  the median of 3, and the bytes written.

`dreamerjax bench --sweep` times every point of --sizes x --dtypes x --seeds (1m 12m 50m
200m, float32 bfloat16, 1 4 16) in one process, one JSON line per point as it finishes
(appended to --out FILE.jsonl, which a second run of the same command goes on from), a
point that does not fit the device a line saying so (run_sweep).

`dreamerjax bench --env ID` times a whole run instead (run_env_bench): the protocol's
schedule (train ratio 512, batch 16 x 64, 1m, 16 envs, one seed) through the run's own
Trainer (trainers.make_trainer: the compiled chunk, or trainers.HostTrainer for gym_,
atari_, dmc_, crafter_ ids), chunk by chunk: rows per second of acting alone (the chunks
before the replay's gate, which owe no updates: policy + env step + replay insert) and
updates per second of the chunks after it (acting, inserting and the 8 updates owed per
tick). For a gym_ id whose task is also a gymnax id (gym_CartPole-v1) the compiled run
of that id is timed in the same process, its chunks alternated with the host run's, so
that both see the same load.

Nothing here asserts a speed. The figures go to stdout (a table, or one JSON object with
--json) and, only with --out, to the file or folder named there: a .json file gets the
result; a folder gets bench_<backend>_<date>.json (env_<id>_<date>.json with --env) and,
for the update bench, README.md, the table of every bench_*.json in that folder.

The package, by job (this module holds main, the entry, and re-exports the modules' names
as `bench.NAME` for the command line, the tests and benchmarks/):
  options.py    Options (the flags), the defaults, the command line that repeats a run
  programs.py   the bare update program (update_program, ticks_program, compile_update,
                for benchmarks/side_by_side), a point's config, plan and trainer, their
                compile (here or in a compile worker, __main__.py) and measure_point
  flops.py      FLOPs per update (cost analysis with scans unrolled, the hand count) and
                the achieved fraction of the device's peak
  timing.py     statistics of timed calls, the matmul peak, the machine, report drawing
  update.py     the update bench (run_bench)
  sweep.py      --sweep (run_sweep)
  whole_run.py  --env (run_env_bench)
  report.py     the tables, the --out folder's README.md and the JSON files
"""

from __future__ import annotations

from dreamerjax.tools import accelerators
from dreamerjax.tools.bench.flops import (
    _cost,
    analytic_flops,
    unrolled_scans,
    update_flops,
    with_flops,
)
from dreamerjax.tools.bench.options import (
    COMPILE_MODES,
    DEFAULT_SEEDS,
    DTYPES,
    ENV,
    FILL_TICKS,
    MATMUL_N,
    REPORT_DIMS,
    SIZE,
    SWEEP_SEEDS,
    SWEEP_SIZES,
    TINY_SEEDS,
    Options,
    _argv,
    _env_argv,
)
from dreamerjax.tools.bench.programs import (
    DoesNotFit,
    Layout,
    _run_worker,
    abstract_states,
    compile_trainer_chunk,
    compile_update,
    compile_worker,
    counting_compiles,
    first_update_tick,
    init_states,
    make_setup,
    make_trainer,
    measure_point,
    point_config,
    program_bytes,
    ticks_program,
    update_program,
    use_cache,
)
from dreamerjax.tools.bench.report import (
    _g,
    _print_result,
    _write_json,
    format_env_table,
    format_table,
    markdown,
    out_path,
    table_rows,
    write_results,
)
from dreamerjax.tools.bench.sweep import (
    _key,
    one_line,
    read_sweep,
    run_sweep,
    sweep_points,
)
from dreamerjax.tools.bench.timing import (
    _now,
    _rss_mib,
    _stats,
    machine,
    matmul_peak,
    report_seconds,
    time_updates,
)
from dreamerjax.tools.bench.update import (
    _config_of,
    _strip,
    compile_mode,
    run_bench,
    seed_counts,
)
from dreamerjax.tools.bench.whole_run import (
    _Run,
    _summary,
    compiled_counterpart,
    env_config,
    env_main,
    gate_chunks,
    run_env_bench,
)

__all__ = [
    "COMPILE_MODES",
    "DEFAULT_SEEDS",
    "DTYPES",
    "DoesNotFit",
    "ENV",
    "FILL_TICKS",
    "Layout",
    "MATMUL_N",
    "Options",
    "REPORT_DIMS",
    "SIZE",
    "SWEEP_SEEDS",
    "SWEEP_SIZES",
    "TINY_SEEDS",
    "_Run",
    "_argv",
    "_config_of",
    "_cost",
    "_env_argv",
    "_g",
    "_key",
    "_now",
    "_print_result",
    "_rss_mib",
    "_run_worker",
    "_stats",
    "_strip",
    "_summary",
    "_write_json",
    "abstract_states",
    "analytic_flops",
    "compile_mode",
    "seed_counts",
    "compile_trainer_chunk",
    "compile_update",
    "compile_worker",
    "compiled_counterpart",
    "counting_compiles",
    "env_config",
    "env_main",
    "first_update_tick",
    "format_env_table",
    "format_table",
    "gate_chunks",
    "init_states",
    "machine",
    "make_setup",
    "make_trainer",
    "markdown",
    "matmul_peak",
    "measure_point",
    "one_line",
    "out_path",
    "point_config",
    "program_bytes",
    "read_sweep",
    "report_seconds",
    "run_bench",
    "run_env_bench",
    "run_sweep",
    "sweep_points",
    "table_rows",
    "ticks_program",
    "time_updates",
    "unrolled_scans",
    "update_flops",
    "update_program",
    "use_cache",
    "with_flops",
    "write_results",
    "main",
]


def main(args) -> int:
    """Entry of `dreamerjax bench` (args: cli.BenchArgs or anything with its fields)."""
    opts = Options.of(args)
    error = accelerators.backend_error()
    if error is not None:  # JAX_PLATFORMS asks for a backend this machine does not have
        raise ValueError(error)
    if opts.env is not None:
        return env_main(opts)
    if opts.sweep:
        return run_sweep(opts)
    result = run_bench(opts)
    written = write_results(result, opts.out) if opts.out else []
    return _print_result(result, opts.json, format_table, written)
