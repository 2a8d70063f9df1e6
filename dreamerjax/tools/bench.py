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
  (trace, lower, compile), in this process (--compile in-process, the default off a CPU)
  or, on a CPU by default (--compile children), also in a fresh process against an
  empty persistent cache (cold) and in a second one against the cache the first filled
  (warm), so no in-memory cache counts.
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

The bare update program (update_program, ticks_program, compile_update) stays here for
the benchmarks that time it beside the reference's (benchmarks/side_by_side).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import glob
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from dreamerjax.tools import accelerators

ENV = "CartPole-v1"
SIZE = "1m"
REPORT_DIMS = 1345  # Craftax-Symbolic's observation width (the report bench)
MATMUL_N = 2048
DEFAULT_SEEDS = (1, 3)  # numbers of seeds in one program, the update bench's
SWEEP_SIZES = ("1m", "12m", "50m", "200m")
SWEEP_SEEDS = (1, 4, 16)
DTYPES = ("float32", "bfloat16")
COMPILE_MODES = ("auto", "in-process", "children")


@dataclasses.dataclass(frozen=True)
class Options:
    json: bool = False
    seeds: tuple[int, ...] | None = None  # None: DEFAULT_SEEDS, with --sweep SWEEP_SEEDS
    updates: int = 50  # timed updates at least (3 timed chunks at least)
    warmup: int = 3  # untimed updates after the gate chunk at least
    tiny: bool = False
    out: str | None = None  # a .json file or a folder (--sweep: a .jsonl file); None: stdout
    env: str | None = None  # a whole run of this env id instead of the update alone
    compiled: str | None = None  # --env: the compiled env to compare with ("" for none)
    stretch: int = 5  # ticks per chunk (the benched run's log interval)
    rounds: int = 3  # --env: timed chunks after the gate (0: acting alone)
    num_envs: int = 16  # --env
    set: tuple[str, ...] = ()  # --set KEY=VALUE on the benched config (with --env: both runs)
    size: str = SIZE  # model size preset (config.SIZES); --tiny overrides it
    compile: str = "auto"  # COMPILE_MODES: auto is children on a CPU, else in-process
    sweep: bool = False
    sizes: tuple[str, ...] = SWEEP_SIZES  # --sweep
    dtypes: tuple[str, ...] = DTYPES  # --sweep
    budget: float | None = None  # --sweep: start no point after this many seconds

    @classmethod
    def of(cls, args) -> Options:
        kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
              if getattr(args, f.name, None) is not None}
        if "out" in kw:
            kw["out"] = str(kw["out"])
        for name in ("seeds", "set", "sizes", "dtypes"):
            if name in kw:
                kw[name] = tuple(kw[name])
        if "seeds" in kw:
            kw["seeds"] = tuple(int(n) for n in kw["seeds"])
        return cls(**kw)


# ----------------------------------------------------------------------------- programs


def make_setup(tiny: bool, sets: tuple[str, ...] = (), size: str = SIZE):
    """The benched configuration: CartPole at `size` (or tiny), `--set` items applied."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import loop as loop
    from dreamerjax.run import setup as setup_lib
    config = make_config(ENV, size=size, tiny=tiny)
    if sets:
        config = config_resolve.with_sets(config, sets)
    if config.run.replay_memory != "device":  # its states are made on the device
        raise ValueError("run.replay_memory: `dreamerjax bench` times the update on a device "
                         "replay; benchmarks/replay_memory.py times a host replay against it")
    return setup_lib.make_setup(config)


def abstract_states(setup, num_seeds: int):
    """Shapes of a batch of SeedStates [num_seeds, ...] (nothing is computed)."""
    import jax
    import jax.numpy as jnp

    from dreamerjax.run import loop as loop
    names = tuple(loop.metric_names(setup))
    keys = jax.ShapeDtypeStruct((num_seeds, 2), jnp.uint32)
    return jax.eval_shape(jax.vmap(lambda k: loop.init_seed(setup, k, names)), keys)


def init_states(setup, num_seeds: int):
    """Fresh states of seeds 0 ... num_seeds - 1 from their train keys (run/streams.py)."""
    import jax

    from dreamerjax.run import loop as loop
    from dreamerjax.run import streams
    names = tuple(loop.metric_names(setup))
    keys = streams.keys(range(num_seeds), "train")  # a run's seeds 0 ... n - 1
    return jax.jit(jax.vmap(lambda k: loop.init_seed(setup, k, names)))(keys)


def update_program(setup):
    """The timed update: every seed samples, updates and writes back once. states -> states."""
    import jax

    from dreamerjax.run import loop as loop
    return jax.jit(lambda st: loop.over_seeds(setup, lambda s: loop.train_once(setup, s), st),
                   donate_argnums=0)


def ticks_program(setup, ticks: int):
    """`ticks` ticks of acting and storing (no updates) for every env of every seed."""
    import jax

    from dreamerjax.run import loop as loop

    def run(states):
        def tick(st, _):
            st, _ = loop.over_seeds(setup, lambda s: loop.act_and_store(setup, s), st)
            return st, None
        return jax.lax.scan(tick, states, None, length=ticks)[0]

    return jax.jit(run, donate_argnums=0)


def compile_update(setup, num_seeds: int):
    """Trace, lower and compile the update for num_seeds. Returns (compiled, seconds)."""
    t0 = time.perf_counter()
    traced = update_program(setup).trace(abstract_states(setup, num_seeds))
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    return compiled, {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2,
                      "total": t3 - t0}


def use_cache(path: str) -> None:
    """Point the persistent compilation cache at path, storing every program. Takes effect
    only before this process's first compile (JAX initialises the cache once)."""
    import jax
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def compile_worker(cache: str, config: dict, seed_counts: list[int]) -> dict:
    """Run in a fresh process: the run's chunk and init (compile_trainer_chunk) compiled for
    each seed count against `cache`."""
    import jax

    from dreamerjax.config.defaults import from_dict
    use_cache(cache)
    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **_: hits.append(1) if event.endswith("/cache_hits") else None)
    out = {}
    for n in seed_counts:
        before = len(hits)
        _, trainer = make_trainer(from_dict(config), n)
        _, secs = compile_trainer_chunk(trainer)
        out[str(n)] = dict(secs, cache_hits=len(hits) - before)
    return out


def _run_worker(cache: str, opts: Options, seed_counts) -> dict:
    config, _ = point_config(opts, opts.size)
    spec = json.dumps({"cache": cache, "config": config.to_dict(),
                       "seed_counts": list(seed_counts)})
    worker = [sys.executable, "-m", "dreamerjax.tools.bench", "--compile-worker", spec]
    proc = subprocess.run(worker, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"compile worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    worker = json.loads(proc.stdout.strip().splitlines()[-1])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker["children_peak_rss_mib"] = usage.ru_maxrss / 1024
    return worker


# ----------------------------------------------------------------------------- FLOPs


@contextlib.contextmanager
def unrolled_scans():
    """Make every jax.lax.scan traced inside fully unrolled (for counting FLOPs only)."""
    import jax
    orig = jax.lax.scan

    def scan(f, init, xs=None, length=None, reverse=False, unroll=1, **kw):
        return orig(f, init, xs, length, reverse=reverse, unroll=True, **kw)

    jax.lax.scan = scan
    try:
        yield
    finally:
        jax.lax.scan = orig


def _cost(stage) -> dict:
    ca = stage.cost_analysis()
    return ca[0] if isinstance(ca, list | tuple) else ca


def analytic_flops(setup) -> dict:
    """Hand count of the dense matmuls (2 FLOPs per multiply-add) of one update's RSSM
    rollouts: imagination (forward only; its params are stop-gradiented) and the observe
    scan (forward + backward ~ 3x forward). Elementwise work is left out."""
    cfg, run, sp = setup.config.agent, setup.run, setup.spaces
    r = cfg.rssm
    D, H, G, SC = r.deter, r.hidden, r.blocks, r.stoch * r.classes
    A = sp.act_dim
    gru = D * H + SC * H + A * H + (D // G + 3 * H) * D + (r.dynlayers - 1) * D * D // G
    gru += 3 * D * D // G  # dyncore
    prior = D * H + (r.imglayers - 1) * H * H + H * SC
    F, U = D + SC, cfg.actor.units
    actor = F * U + (cfg.actor.layers - 1) * U * U + U * A
    embed = cfg.enc.units
    post = (embed if r.absolute else D + embed) * H + (r.obslayers - 1) * H * H + H * SC
    B, T, N = run.batch_size, run.batch_length, run.batch_size * run.batch_length
    imagine = 2 * N * (cfg.imag_length * (gru + prior + actor) + actor)
    observe = 3 * 2 * B * T * (gru + post)
    return {"imagination": float(imagine), "observe_fwd_bwd": float(observe)}


# ----------------------------------------------------------------------------- timing


def _stats(xs) -> dict:
    a = np.asarray(xs, np.float64)
    return {"median": float(np.median(a)), "p10": float(np.percentile(a, 10)),
            "p90": float(np.percentile(a, 90)), "mean": float(a.mean()), "n": int(a.size)}


def time_updates(compiled, states, warmup: int, updates: int):
    """Returns (states, seconds of each timed call)."""
    import jax
    for _ in range(warmup):
        states = jax.block_until_ready(compiled(states))
    secs = []
    for _ in range(updates):
        t = time.perf_counter()
        states = jax.block_until_ready(compiled(states))
        secs.append(time.perf_counter() - t)
    return states, secs


def matmul_peak(n: int = MATMUL_N, reps: int = 10) -> float:
    """Median float32 FLOP/s of a jitted n x n matmul in this process."""
    import jax
    import jax.numpy as jnp
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (n, n), jnp.float32)
    b = jax.random.normal(kb, (n, n), jnp.float32)
    f = jax.jit(lambda x, y: x @ y)
    jax.block_until_ready(f(a, b))
    secs = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(f(a, b))
        secs.append(time.perf_counter() - t)
    return 2 * n ** 3 / float(np.median(secs))


def machine() -> dict:
    import jax
    import jaxlib
    model, flags = "unknown", set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = val.strip()
            if key.strip() == "flags" and not flags:
                flags = set(val.split())
    dev = jax.devices()[0]
    return {
        "cpu": model, "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "simd": [f for f in ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16")
                 if f in flags],
        "loadavg_1m_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "backend": jax.default_backend(), "device": getattr(dev, "device_kind", str(dev)),
        "devices": jax.device_count(), "jax": jax.__version__, "jaxlib": jaxlib.__version__,
        "python": platform.python_version(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


# ----------------------------------------------------------------------------- the run's programs


class DoesNotFit(MemoryError):
    """A point whose state or program does not fit the device's memory (found before
    anything is allocated for it)."""


def first_update_tick(config) -> int:
    """The first tick after which the run's schedule owes an update (the replay's gate)."""
    from dreamerjax.data import schedule as schedule_lib
    sched = schedule_lib.schedule_from_config(config.run, config.agent.reference)
    tick = 0
    while int(schedule_lib.updates_owed(sched, tick)) == 0:
        tick += 1
    return tick


@dataclasses.dataclass(frozen=True)
class Layout:
    """A benched run cut into chunks of `ticks` ticks (its log interval, the chunk the
    trainer compiles): `fill` chunks of acting alone before the replay's gate, `warm`
    chunks with updates untimed (the gate's own, then --warmup), `timed` chunks timed."""

    ticks: int
    fill: int
    warm: int
    timed: int

    @property
    def chunks(self) -> int:
        return self.fill + self.warm + self.timed


def point_config(opts: Options, size: str, dtype: str | None = None):
    """(config, Layout) of a benched run: CartPole at `size` (or tiny) with the protocol's
    schedule (16 envs, train ratio 512, batch 16 x 64), `--set` items and the compute
    dtype applied, as many rows as the layout's chunks of --stretch ticks: the chunks
    before the gate fill the replay, then --warmup and --updates updates at least (3 timed
    chunks at least, for a median)."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.resolve import make_config
    sets = (*opts.set, *((f"jax.compute_dtype={dtype}",) if dtype else ()))

    def config_of(**fields):
        config = make_config(ENV, size=size, tiny=opts.tiny, **fields)
        return config_resolve.with_sets(config, sets) if sets else config

    base = config_of()
    if base.run.replay_memory != "device":  # its states are made on the device
        raise ValueError("run.replay_memory: `dreamerjax bench` times the run on a device "
                         "replay; benchmarks/replay_memory.py times a host replay against it")
    run, ticks = base.run, opts.stretch
    per_chunk = max(1, round(ticks * run.num_envs * run.train_ratio
                             / (run.batch_size * run.batch_length)))
    gate = first_update_tick(base)
    layout = Layout(ticks, gate // ticks, 1 + math.ceil(opts.warmup / per_chunk),
                    max(3, math.ceil(opts.updates / per_chunk)))
    rows = ticks * run.num_envs
    return config_of(steps=layout.chunks * rows, eval_every=rows, eval_episodes=1), layout


def tree_bytes(tree) -> int:
    import jax
    return sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(tree))


@contextlib.contextmanager
def counting_compiles():
    """While inside: a list that gets one entry per XLA compile (backend_compile event)."""
    import jax
    seen: list[float] = []

    def listener(event: str, duration: float, **_) -> None:
        if event.endswith("backend_compile_duration"):
            seen.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def compile_trainer_chunk(trainer) -> tuple:
    """The trainer's chunk (and init) lowered and compiled for the run's abstract state,
    as the run's first call compiles them; JAX keeps the executables, so the run's calls
    find them. Returns (compiled chunk, seconds: trace, lower, compile, total, init)."""
    states = trainer.abstract_state()
    t0 = time.perf_counter()
    traced = trainer._chunk.trace(trainer.chunk_input(states), trainer.owed(0))
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    trainer._init.lower(trainer._keys()).compile()
    t4 = time.perf_counter()
    return compiled, {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2,
                      "total": t3 - t0, "init": t4 - t3}


def program_bytes(compiled) -> int | None:
    """Device bytes a compiled program needs while it runs (arguments, outputs not aliased
    to them, temporaries), from XLA's memory analysis; None where it gives none."""
    try:
        m = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend analyses memory
        return None
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
               + m.temp_size_in_bytes)


def make_trainer(config, num_seeds: int):
    """The run's plan (seeds 0 ... n - 1, one device) and trainer, as `train` makes them."""
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run import trainers
    plan = plan_lib.make_plan(config, tuple(range(num_seeds)))
    return plan, trainers.make_trainer(plan)


def measure_point(opts: Options, size: str, dtype: str | None, num_seeds: int) -> dict:
    """One configuration timed through the run's own trainer: its chunk and init compiled
    in this process (timed), the run's state initialised from the seeds' train keys, the
    chunks before the gate (acting alone) and after it (acting and the updates the
    schedule owes) called as `train` calls them, each timed to block_until_ready.
    Raises DoesNotFit before allocating when the state or the compiled chunk exceeds the
    memory free on the device."""
    import jax

    from dreamerjax.run import memory
    config, layout = point_config(opts, size, dtype)
    plan, trainer = make_trainer(config, num_seeds)
    have, where = memory.available()
    mem = {"state_bytes": tree_bytes(trainer.abstract_state()), "available_bytes": have,
           "available_where": where}
    if mem["state_bytes"] > have:
        raise DoesNotFit(f"does not fit: the run's state, {memory.fmt(mem['state_bytes'])}, "
                         f"exceeds {memory.fmt(have)} {where}")
    with counting_compiles() as compiles:
        compiled, secs = compile_trainer_chunk(trainer)
        mem["chunk_program_bytes"] = need = program_bytes(compiled)
        if need is not None and need > have:
            raise DoesNotFit(f"does not fit: the compiled chunk needs {memory.fmt(need)} "
                             f"(XLA's memory analysis), more than {memory.fmt(have)} {where}")
        before = len(compiles)
        states = jax.block_until_ready(trainer.init())
        chunks = []
        for i in range(layout.chunks):
            t = time.perf_counter()
            states, ends = trainer.chunk(states, i)
            states, _ = jax.block_until_ready((states, ends))
            chunks.append({"seconds": time.perf_counter() - t,
                           "updates": int(trainer.owed(i).sum())})
            if i == layout.fill + layout.warm - 1:
                before = len(compiles)  # compiles while the timed chunks ran: none expected
        compiled_while_timed = len(compiles) - before
    if (np.asarray(states.bad_update) >= 0).any():
        raise FloatingPointError(f"non-finite loss in the {num_seeds}-seed bench")
    acting = [c for c in chunks[1:layout.fill] if c["updates"] == 0]
    timed = chunks[layout.fill + layout.warm:]
    per_update = [c["seconds"] / c["updates"] for c in timed]
    rows = layout.ticks * plan.setup.run.num_envs * num_seeds
    return {
        "size": "tiny" if opts.tiny else size,
        "dtype": plan.setup.config.agent.compute_dtype, "seeds": num_seeds,
        "seed_loop": plan.seed_loop, "ticks_per_chunk": layout.ticks,
        "seconds_per_update": _stats(per_update),
        "seconds_per_update_per_seed": _stats(np.asarray(per_update) / num_seeds),
        "updates_timed": sum(c["updates"] for c in timed), "chunks_timed": len(timed),
        "acting_rows_per_s": (float(np.median([rows / c["seconds"] for c in acting]))
                              if acting else None),
        "compile_seconds": secs, "compiled_while_timed": compiled_while_timed,
        "memory": mem, "_setup": plan.setup,
    }


# ----------------------------------------------------------------------------- FLOPs per point


def update_flops(setup) -> tuple[float | None, str]:
    """(FLOPs of one seed's update with every scan step counted, their source): the
    update program lowered with every lax.scan unrolled (pre-optimisation HLO; XLA counts
    a rolled loop's body once), by the running backend's cost analysis or else the CPU's
    (accelerators.program_flops)."""
    import jax
    program = update_program(setup)
    states = abstract_states(setup, 1)
    # JAX keeps the traces of jitted functions (loop._update's among them): one traced
    # rolled would be reused here, one traced unrolled by the programs that come after.
    jax.clear_caches()
    try:
        with unrolled_scans():
            return accelerators.program_flops(program, (states,))
    finally:
        jax.clear_caches()


def with_flops(point: dict, flops: float | None, source: str, device_kind: str) -> dict:
    """The point's FLOPs per update, achieved FLOP/s (of every seed) and fraction of the
    device's peak (accelerators.peak_flops; None where no peak is known)."""
    import jax
    med = point["seconds_per_update"]["median"]
    achieved = flops * point["seeds"] / med if flops else None
    peak, assumption = accelerators.peak_flops(
        device_kind, point["dtype"], jax.config.jax_default_matmul_precision)
    return {**point, "flops_per_update": flops, "flops_source": source,
            "achieved_flops_per_s": achieved, "achieved_tflops_per_s":
            achieved / 1e12 if achieved else None,
            "peak_flops_per_s": peak, "peak_assumption": assumption,
            "fraction_of_peak": achieved / peak if achieved and peak else None}


# ----------------------------------------------------------------------------- driver


def compile_mode(opts: Options) -> str:
    """--compile resolved: children (cold and warm figures from fresh processes) on a CPU,
    in-process elsewhere (a TPU opens in one process at a time; an accelerator's compile
    children cost minutes each)."""
    import jax
    backend = jax.default_backend()
    if opts.compile == "children" and backend in ("tpu",):
        raise ValueError("--compile children: a TPU opens in one process at a time; use "
                         "--compile in-process (the default off a CPU)")
    if opts.compile == "auto":
        return "children" if backend == "cpu" else "in-process"
    return opts.compile


def _config_of(setup, opts: Options, layout_ticks: int) -> dict:
    return {"env": ENV, "size": "tiny" if opts.tiny else opts.size,
            "batch_size": setup.run.batch_size, "batch_length": setup.run.batch_length,
            "imag_length": setup.config.agent.imag_length,
            "num_envs": setup.run.num_envs, "train_ratio": setup.run.train_ratio,
            "updates": opts.updates, "ticks_per_chunk": layout_ticks,
            "compute_dtype": setup.config.agent.compute_dtype, "set": list(opts.set),
            "warmup": opts.warmup}


def run_bench(opts: Options) -> dict:
    """Every figure of one bench run (see the module docstring)."""
    counts = list(dict.fromkeys(opts.seeds or DEFAULT_SEEDS))
    mode = compile_mode(opts)
    out: dict = {}
    if mode == "children":
        cache = tempfile.mkdtemp(prefix="dreamerjax-bench-cache-")
        # Cold and warm compiles each in a fresh process; the cold one starts from an empty
        # cache directory, the warm one reads what the cold one wrote.
        cold = _run_worker(cache, opts, counts)
        warm = _run_worker(cache, opts, counts)
        use_cache(cache)  # so this process loads the programs compiled above
        out.update(compile_seconds_cold=cold[str(counts[0])]["total"],
                   compile_seconds_warm=warm[str(counts[0])]["total"],
                   compile_by_seeds={"cold": _strip(cold), "warm": _strip(warm)},
                   compile_peak_rss_mib=warm["children_peak_rss_mib"])
    info = machine()
    points, rss = {}, {}
    for n in counts:
        points[str(n)] = measure_point(opts, opts.size, None, n)
        rss[str(n)] = _rss_mib()  # cumulative: the process's peak so far
    setup = points[str(counts[0])].pop("_setup")
    for p in points.values():
        p.pop("_setup", None)
    flops, source = update_flops(setup)
    points = {n: with_flops(p, flops, source, info["device"]) for n, p in points.items()}
    first = points[str(counts[0])]
    peak = matmul_peak()
    report_s, report_bytes = report_seconds()
    achieved = first["achieved_flops_per_s"]
    out.update({
        "config": _config_of(setup, opts, first["ticks_per_chunk"]),
        "machine": info, "platform": info["backend"], "device_kind": info["device"],
        "jax": info["jax"], "size": first["size"], "dtype": first["dtype"], "seeds": counts,
        "compile_mode": mode, "points": points,
        "seconds_per_update": {n: p["seconds_per_update"] for n, p in points.items()},
        "seconds_per_update_per_seed": {n: p["seconds_per_update_per_seed"]
                                        for n, p in points.items()},
        "compile_seconds": first["compile_seconds"]["total"],
        "rows_per_s_no_update": first["acting_rows_per_s"], "rows_per_s_seeds": counts[0],
        "flops_per_update": flops, "flops_source": source,
        "flops_analytic": analytic_flops(setup),
        "achieved_flops_per_s": achieved,
        "peak_flops_per_s": first["peak_flops_per_s"],
        "peak_assumption": first["peak_assumption"],
        "fraction_of_peak": first["fraction_of_peak"],
        "matmul_peak_flops_per_s": peak, "matmul_n": MATMUL_N,
        "efficiency": achieved / peak if achieved else None,
        "peak_rss_mib": _rss_mib(), "peak_rss_mib_after_seeds": rss,
        "report_seconds_wide": report_s, "report_bytes_wide": report_bytes,
        "report_dims": REPORT_DIMS,
        "date": _now(), "command": "dreamerjax bench " + " ".join(_argv(opts)),
    })
    return out


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------- sweep


def sweep_points(opts: Options) -> list[tuple[str, str, int]]:
    """(size, dtype, seeds) of --sweep, in the order they run: small sizes first."""
    sizes = ("tiny",) if opts.tiny else opts.sizes
    return [(s, d, n) for s in sizes for d in opts.dtypes
            for n in (opts.seeds or SWEEP_SEEDS)]


def _key(line: dict) -> tuple[str, str, int]:
    return (line["size"], line["dtype"], int(line["seeds"]))


def read_sweep(path: str | None) -> tuple[set, dict]:
    """(points finished in the file at `path`, times each unfinished point was started)."""
    done, started = set(), {}
    if path and os.path.exists(path):
        with open(path) as f:
            for text in f:
                with contextlib.suppress(ValueError, KeyError):
                    line = json.loads(text)
                    if line["status"] == "started":
                        started[_key(line)] = started.get(_key(line), 0) + 1
                    else:
                        done.add(_key(line))
    return done, {k: v for k, v in started.items() if k not in done}


def run_sweep(opts: Options) -> int:
    """--sweep: every (size, dtype, seeds) point timed in this process, one JSON line per
    point printed (and appended to --out) as it finishes, so a command cut off by a time
    limit keeps what it measured; run again with the same --out, it goes on from the
    first point not in the file. A point that does not fit the device gets a line saying
    so; a point started twice without finishing (cut off) is skipped with a line."""
    import gc

    import jax
    start = time.perf_counter()
    info = machine()
    done, started = read_sweep(opts.out)
    flops_of: dict = {}
    too_big: set = set()
    head = {"platform": info["backend"], "device_kind": info["device"], "jax": info["jax"]}

    def emit(line: dict) -> None:
        text = json.dumps({**line, **head, "date": _now()}, sort_keys=True)
        print(text, flush=True)
        if opts.out:
            os.makedirs(os.path.dirname(opts.out) or ".", exist_ok=True)
            with open(opts.out, "a") as f:
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())

    for size, dtype, n in sweep_points(opts):
        key = {"size": size, "dtype": dtype, "seeds": n}
        if (size, dtype, n) in done:
            continue
        if opts.budget is not None and time.perf_counter() - start > opts.budget:
            print(f"dreamerjax bench --sweep: --budget {opts.budget:g} s spent; run the same "
                  "command again to go on", file=sys.stderr)
            return 0
        if started.get((size, dtype, n), 0) >= 2:
            emit({**key, "status": "cut_off", "reason": "started twice without finishing "
                  "(a time limit ended the command); skipped"})
            continue
        if any(s == size and d == dtype and m < n for s, d, m in too_big):
            emit({**key, "status": "skipped", "reason": "fewer seeds of this size and "
                  "dtype did not fit the device"})
            continue
        emit({**key, "status": "started"})
        try:
            point = measure_point(opts, SIZE if opts.tiny else size, dtype, n)
            setup = point.pop("_setup")
            if (size, dtype) not in flops_of:
                flops_of[size, dtype] = update_flops(setup)
            emit({**with_flops(point, *flops_of[size, dtype], info["device"]),
                  **key, "status": "ok"})
        except (DoesNotFit, MemoryError) as e:
            too_big.add((size, dtype, n))
            emit({**key, "status": "skipped", "reason": one_line(e)})
        except Exception as e:  # noqa: BLE001 - an allocation the analysis did not foresee
            if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
                emit({**key, "status": "failed", "reason": one_line(e)[:500]})
            else:
                too_big.add((size, dtype, n))
                emit({**key, "status": "skipped",
                      "reason": "out of device memory: " + one_line(e)[:300]})
        finally:
            point = setup = None
            gc.collect()
            jax.clear_caches()
    return 0


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def report_seconds(dims: int = REPORT_DIMS, repeats: int = 3, seed: int = 0
                   ) -> tuple[float, int]:
    """(median seconds, bytes written) of drawing the open-loop report's pictures for a
    `dims`-wide vector observation: a [16, 64] batch, 8 rows observed, random 0/1 truth
    (as Craftax-Symbolic's flags) and a prediction off by noise that grows with the
    dimension."""
    from dreamerjax.viz import report

    rng = np.random.default_rng(seed)
    truth = (rng.uniform(size=(16, 64, dims)) > 0.7).astype(np.float32)
    noise = rng.normal(0.0, 0.1, truth.shape) * np.linspace(0.0, 3.0, dims)
    host = {"context": 8, "truth/vector": truth, "pred/vector": truth + noise,
            "reward": np.zeros((16, 64)), "pred_reward": np.zeros((16, 64)),
            "cont": np.ones((16, 64)), "pred_cont": np.ones((16, 64))}
    secs, size = [], 0
    with tempfile.TemporaryDirectory(prefix="dreamerjax-bench-report-") as out:
        for _ in range(repeats):
            t = time.perf_counter()
            files = report.write_openl(host, out, f"{dims} dimensions: ")
            secs.append(time.perf_counter() - t)
        size = sum(os.path.getsize(p) for p in files)
    return float(np.median(secs)), int(size)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _strip(worker: dict) -> dict:
    return {k: v for k, v in worker.items() if k != "children_peak_rss_mib"}


def _argv(opts: Options) -> list[str]:
    out = ["--json"] if opts.json else []
    out += ["--sweep"] if opts.sweep else []
    if opts.tiny:
        out.append("--tiny")
    for name in ("size", "updates", "warmup", "stretch", "compile", "budget"):
        value = getattr(opts, name)
        if value != getattr(Options, name):
            out += [f"--{name}", f"{value:g}" if isinstance(value, float) else str(value)]
    for name in ("seeds", "sizes", "dtypes"):
        value = getattr(opts, name)
        if value is not None and value != getattr(Options, name):
            out += [f"--{name}", *map(str, value)]
    for item in opts.set:
        out += ["--set", item]
    return out


# ----------------------------------------------------------------------------- output


def _g(x: float) -> str:
    return f"{x / 1e9:.2f} G"


def table_rows(r: dict) -> list[tuple[str, str]]:
    """(label, value) pairs of one result (of this version, or an older one's JSON)."""
    rows = []
    for n, s in r["seconds_per_update_per_seed"].items():
        rows.append((f"s / update / seed, {n} seed{'s' if n != '1' else ''}",
                     f"{s['median']:.3f} (p10 {s['p10']:.3f}, p90 {s['p90']:.3f})"))
    if "compile_seconds_cold" in r:
        rows += [("compile, cold (s)", f"{r['compile_seconds_cold']:.1f}"),
                 ("compile, warm cache (s)", f"{r['compile_seconds_warm']:.1f}")]
    if "compile_seconds" in r:
        rows.append(("compile, in this process (s)", f"{r['compile_seconds']:.1f}"))
    if r.get("rows_per_s_no_update"):
        rows.append((f"rows / s, tick without updates ({r.get('rows_per_s_seeds', 1)} seed)",
                     f"{r['rows_per_s_no_update']:,.0f}"))
    if r.get("flops_per_update"):
        rows.append(("FLOPs / update (all scan steps)", _g(r["flops_per_update"])))
    if "flops_per_update_xla" in r:
        rows.append(("FLOPs / update (XLA, loop bodies once)", _g(r["flops_per_update_xla"])))
    if r.get("achieved_flops_per_s"):
        rows.append(("achieved FLOP/s (1 seed)" if "seeds" not in r else
                     f"achieved FLOP/s ({r['seeds'][0]} seed(s))",
                     _g(r["achieved_flops_per_s"])))
    rows.append((f"f32 matmul peak FLOP/s ({r.get('matmul_n', MATMUL_N)}^3)",
                 _g(r["matmul_peak_flops_per_s"])))
    if r.get("efficiency"):
        rows.append(("efficiency (achieved / peak)", f"{100 * r['efficiency']:.1f} %"))
    if r.get("fraction_of_peak"):
        rows.append(("fraction of the device's peak", f"{100 * r['fraction_of_peak']:.1f} %"))
    first = next(iter(r.get("peak_rss_mib_after_seeds", {}).items()), None)
    if first is not None:
        rows.append((f"peak RSS after the {first[0]}-seed phase (MiB)", f"{first[1]:,.0f}"))
    rows.append(("peak RSS, whole bench (MiB)", f"{r['peak_rss_mib']:,.0f}"))
    if r.get("report_seconds_wide") is not None:
        rows.append((f"report pictures, {r['report_dims']:,}-dim vector (s, MB)",
                     f"{r['report_seconds_wide']:.2f} ({r['report_bytes_wide'] / 1e6:.2f} MB)"))
    return rows


def format_table(r: dict) -> str:
    rows = table_rows(r)
    w = max(len(k) for k, _ in rows)
    m = r["machine"]
    dtype = r["config"].get("compute_dtype", "float32")
    head = (f"dreamerjax bench: {r['config']['env']} {r['config']['size']} ({dtype}), "
            f"{m['backend']} ({m['cpu'] if m['backend'] == 'cpu' else m['device']}, "
            f"{m['cores']} cores), jax {m['jax']}")
    return "\n".join([head] + [f"  {k:<{w}}  {v}" for k, v in rows])


def markdown(results: list[dict]) -> str:
    """The README.md of an --out folder: its machines, one column per bench_*.json."""
    lines = ["# dreamerjax bench", "",
             "Generated by `dreamerjax bench --out DIR` (dreamerjax/tools/bench.py; "
             "docs/performance.md says what each figure means and how it was taken). One "
             "column per `bench_*.json` in this folder.", ""]
    for i, r in enumerate(results):
        m = r["machine"]
        lines.append(
            f"- **[{i + 1}]** {r['date']}: {m['backend']}, {m['cpu']} "
            f"({m['cores']} cores; {', '.join(m['simd']) or 'no AVX'}); device {m['device']}; "
            f"jax {m['jax']}; {r['config']['env']} {r['config']['size']}, "
            f"{r['config']['updates']} timed updates after {r['config']['warmup']}; "
            f"command `{r['command']}`")
    lines.append("")
    head = ["figure", *(f"dreamerjax [{i + 1}]" for i in range(len(results)))]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    labels = [k for k, _ in table_rows(results[-1])]
    cols = [dict(table_rows(r)) for r in results]
    for label in labels:
        lines.append("| " + " | ".join([label, *(c.get(label, "") for c in cols)]) + " |")
    lines += ["", "Figures of different machines or days never share a ratio. The reference "
              "and Ajax (ajax-rl, an independent JAX DreamerV3) measured side by side with "
              "dreamerjax, in one run, are in "
              "side_by_side_*.json (benchmarks/side_by_side/run.py, table.py; "
              "docs/performance.md). Across machines compare the efficiency row."]
    return "\n".join(lines) + "\n"


def _write_json(result: dict, path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")


def out_path(out: str, name: str) -> str:
    """Where --out puts a result: `out` itself when it names a .json file, else the file
    `name` (dated, e.g. bench_cpu_20261130.json) in the folder `out`."""
    return out if out.endswith(".json") else os.path.join(out, name)


def write_results(result: dict, out: str) -> list[str]:
    """The update bench's result at --out (module docstring); the paths written."""
    day = result["date"][:10].replace("-", "")
    path = out_path(out, f"bench_{result['machine']['backend']}_{day}.json")
    _write_json(result, path)
    if path == out:
        return [path]
    results = []
    for p in sorted(glob.glob(os.path.join(out, "bench_*.json"))):
        with open(p) as f:
            results.append(json.load(f))
    results.sort(key=lambda r: r["date"])
    readme = os.path.join(out, "README.md")
    with open(readme, "w") as f:
        f.write(markdown(results))
    return [path, readme]


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


def _print_result(result: dict, as_json: bool, table, written: list[str]) -> int:
    """One JSON object, or the table and where the figures were written."""
    if as_json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(table(result))
        if written:
            print(f"written: {' and '.join(written)}")
    return 0


# ----------------------------------------------------------------------------- whole runs


def compiled_counterpart(env_id: str) -> str | None:
    """The compiled env id of the same task (gym_CartPole-v1 -> gymnax CartPole-v1)."""
    from dreamerjax.envs.host import base as host_lib
    if not env_id.startswith("gym_"):
        return None
    from dreamerjax import envs as envs_lib
    task = host_lib.split_env_id(env_id)[1]
    try:
        if not envs_lib.parse_env_id(task)[0].compiled:
            return None
        envs_lib.make_env(task)
    except Exception:  # noqa: BLE001 - no compiled env of that name
        return None
    return task


def env_config(env_id: str, opts: Options, chunks: int):
    """The protocol's run (1m or tiny, 16 envs, train ratio 512, batch 16 x 64) over
    `chunks` log intervals of `opts.stretch` ticks, one evaluation episode (never run),
    with --set items applied (e.g. a CNN that fits MinAtar's 10 x 10 frames)."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.resolve import make_config
    n = opts.num_envs
    config = make_config(env_id, size=opts.size, tiny=opts.tiny, num_envs=n,
                         steps=chunks * opts.stretch * n, eval_every=opts.stretch * n,
                         eval_episodes=1)
    return config_resolve.with_sets(config, opts.set) if opts.set else config


def gate_chunks(opts: Options) -> int:
    """Chunks up to and including the one where the schedule's first update falls."""
    from dreamerjax.data import schedule as schedule_lib
    config = env_config("CartPole-v1", opts, 10**4)
    sched = schedule_lib.schedule_from_config(config.run, config.agent.reference)
    tick = 0
    while int(schedule_lib.updates_owed(sched, tick)) == 0:
        tick += 1
    return tick // opts.stretch + 1


class _Run:
    """One seed's run of an env, driven chunk by chunk by its own Trainer."""

    def __init__(self, env_id: str, opts: Options, chunks: int):
        import jax

        from dreamerjax.run import plan as plan_lib
        from dreamerjax.run import trainers
        self.env_id = env_id
        plan = plan_lib.make_plan(env_config(env_id, opts, chunks), (0,))
        self.setup, self.host = plan.setup, plan.host
        self.trainer = trainers.make_trainer(plan)
        if self.host:
            self.trainer.profile = {}
        t = time.perf_counter()
        self.states = jax.block_until_ready(self.trainer.init())
        self.init_seconds = time.perf_counter() - t
        self.index = 0
        self.chunks: list[dict] = []

    def chunk(self) -> dict:
        import jax
        t = self.setup.ticks_per_log
        due = int(np.sum(self.trainer.updates_due[self.index * t:(self.index + 1) * t]))
        prof = self.trainer.profile if self.host else None
        if prof is not None:
            prof.clear()
        t0 = time.perf_counter()
        states, ends = self.trainer.chunk(self.states, self.index)
        t1 = time.perf_counter()
        self.states = jax.block_until_ready(states)
        jax.block_until_ready(ends)
        secs = time.perf_counter() - t0
        out = {"index": self.index, "ticks": t, "rows": t * self.setup.run.num_envs,
               "updates": due, "seconds": secs}
        if prof is not None:  # where the host loop's time went
            out["host"] = {k: float(v) for k, v in prof.items() if k != "ticks"}
            out["host"]["final_wait"] = secs - (t1 - t0)
        if (np.asarray(self.states.bad_update) >= 0).any():
            raise FloatingPointError(f"non-finite loss in the {self.env_id} bench")
        self.index += 1
        self.chunks.append(out)
        return out

    def close(self) -> None:
        if self.host:
            self.trainer.close()


def _summary(run: _Run, first_timed: int) -> dict:
    acting = [c for c in run.chunks[1:] if c["updates"] == 0]  # chunk 0 compiles
    timed = [c for c in run.chunks[first_timed:] if c["updates"] > 0]
    out = {"env": run.env_id, "host": run.host, "init_seconds": run.init_seconds,
           "first_chunk_seconds": run.chunks[0]["seconds"], "chunks": run.chunks}
    if acting:
        out["acting_rows_per_s"] = (sum(c["rows"] for c in acting)
                                    / sum(c["seconds"] for c in acting))
        out["acting_rows"] = sum(c["rows"] for c in acting)
        # the median chunk: one chunk preempted by other work moves the sum's figure
        out["acting_rows_per_s_median_chunk"] = float(np.median(
            [c["rows"] / c["seconds"] for c in acting]))
    if timed:
        per = [c["updates"] / c["seconds"] for c in timed]
        out["updates_per_s"] = sum(c["updates"] for c in timed) / sum(c["seconds"]
                                                                       for c in timed)
        out["updates_per_s_per_chunk"] = per
        out["updates_timed"] = sum(c["updates"] for c in timed)
        if run.host:
            keys = timed[0]["host"]
            out["host_seconds_timed"] = {k: sum(c["host"][k] for c in timed) for k in keys}
    return out


def run_env_bench(opts: Options) -> dict:
    """Acting rows/s and whole-run updates/s of --env (and its compiled counterpart)."""
    other = opts.compiled if opts.compiled is not None else compiled_counterpart(opts.env)
    gate = gate_chunks(opts)
    first_timed = gate if opts.rounds else max(2, gate - 1)
    chunks = first_timed + opts.rounds
    length = gate + max(opts.rounds, 1)  # the run's steps: a replay that holds a sequence
    loads = [os.getloadavg()]
    runs = [_Run(opts.env, opts, length)]
    if other:
        runs.append(_Run(other, opts, length))
    info = machine()
    try:
        for i in range(chunks):  # alternated A B B A ..., so both runs see the same load
            for r in (runs if i % 2 == 0 else runs[::-1]):
                r.chunk()
            loads.append(os.getloadavg())
    finally:
        for r in runs:
            r.close()
    out = {"config": {"size": "tiny" if opts.tiny else opts.size, "num_envs": opts.num_envs,
                      "train_ratio": runs[0].setup.run.train_ratio,
                      "batch_size": runs[0].setup.run.batch_size,
                      "batch_length": runs[0].setup.run.batch_length,
                      "seeds": 1, "stretch_ticks": opts.stretch, "rounds": opts.rounds,
                      "set": list(opts.set)},
           "machine": info, "loadavg": [list(x) for x in loads],
           "runs": [_summary(r, first_timed) for r in runs],
           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": "dreamerjax bench " + " ".join(_env_argv(opts))}
    a, b = out["runs"][0], out["runs"][-1]
    if len(runs) == 2 and "updates_per_s" in a and "updates_per_s" in b:
        out["host_over_compiled_updates_per_s"] = a["updates_per_s"] / b["updates_per_s"]
    return out


def _env_argv(opts: Options) -> list[str]:
    out = ["--env", opts.env] + (["--json"] if opts.json else [])
    out += ["--tiny"] if opts.tiny else []
    for name in ("size", "compiled", "stretch", "rounds", "num_envs"):
        value = getattr(opts, name)
        if value != getattr(Options, name):
            out += [f"--{name.replace('_', '-')}", str(value)]
    for item in opts.set:
        out += ["--set", item]
    return out


def format_env_table(r: dict) -> str:
    m = r["machine"]
    loads = [x[0] for x in r["loadavg"]]
    lines = [f"dreamerjax bench --env: {r['config']['size']}, {r['config']['num_envs']} envs, "
             f"train ratio {r['config']['train_ratio']:g}, {m['backend']} ({m['cpu']}, "
             f"{m['cores']} cores), load average (1 min) {min(loads):.1f}-{max(loads):.1f}"]
    for run in r["runs"]:
        kind = "host" if run["host"] else "compiled"
        act = run.get("acting_rows_per_s")
        ups = run.get("updates_per_s")
        med = run.get("acting_rows_per_s_median_chunk")
        lines.append(f"  {run['env']:<22} {kind:<8}  acting {act:>8,.0f} rows/s (median "
                     f"chunk {med:,.0f})" if act
                     else f"  {run['env']:<22} {kind:<8}  acting          -")
        if ups:
            per = ", ".join(f"{x:.3f}" for x in run["updates_per_s_per_chunk"])
            lines[-1] += (f"   run {ups:.3f} updates/s ({run['updates_timed']} updates; "
                          f"per chunk {per})")
        if run.get("host_seconds_timed"):
            h = run["host_seconds_timed"]
            lines.append("    host loop, timed chunks: " + ", ".join(
                f"{k} {v:.2f} s" for k, v in h.items()))
    if "host_over_compiled_updates_per_s" in r:
        lines.append(f"  host / compiled updates/s: {r['host_over_compiled_updates_per_s']:.3f}")
    return "\n".join(lines)


def env_main(opts: Options) -> int:
    result = run_env_bench(opts)
    written = []
    if opts.out:  # a .json file, or a folder for env_<id>_<date>.json
        day = result["date"][:10].replace("-", "")
        name = opts.env.replace(":", "_").replace("/", "_")
        written = [out_path(opts.out, f"env_{name}_{day}.json")]
        _write_json(result, written[0])
    return _print_result(result, opts.json, format_env_table, written)


if __name__ == "__main__":
    # The compile worker (_run_worker): XLA_FLAGS come from the parent's environment.
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        spec = json.loads(sys.argv[2])
        print(json.dumps(compile_worker(spec["cache"], spec["config"], spec["seed_counts"])))
        sys.exit(0)
