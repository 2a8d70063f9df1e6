"""`dreamerjax bench`: what one update of the 1m CartPole configuration costs on this machine.

What is timed, all with the real functions of the training loop (run/loop.py):

- the update program: `jit(over_seeds(train_once))` over n seeds (vmapped on accelerators,
  one after another on a CPU) (sample a batch from the
  replay, one agent update, write the posterior latents back), the replay donated as in
  the training chunk. Its compile time is trace + lower + XLA compile, measured in a fresh
  subprocess against an empty persistent cache (cold) and again in a second fresh
  subprocess against the cache the first one filled (warm), so no in-memory cache counts.
- seconds per update per seed: each call timed with block_until_ready after warm-up
  updates, on a replay already holding `ticks` ticks of rows (enough for the batch).
- rows per second of the tick alone: a jitted scan of act_and_store over all envs, 1 seed.
- FLOPs: XLA's cost analysis of the compiled update counts a while loop's body once, so
  the 64-step observe scan (and its backward), the 15-step imagination and the return
  scans count as one step each (`flops_per_update_xla`). `flops_per_update` is the same
  analysis on the update lowered with every lax.scan fully unrolled, which counts every
  step; `flops_analytic` is a hand count of the dense matmuls as a cross-check.
- the float32 dense-matmul peak of this process and efficiency = achieved / peak.
- the open-loop report's pictures (viz/report.write_openl, the host's part of a log
  point's report) for a vector observation as wide as Craftax-Symbolic's (1,345
  dimensions; a [16, 64] batch of random truth and a noisy prediction): seconds to draw,
  the median of 3, and the bytes written.

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
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import glob
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

ENV = "CartPole-v1"
SIZE = "1m"
REPORT_DIMS = 1345  # Craftax-Symbolic's observation width (the report bench)
MATMUL_N = 2048


@dataclasses.dataclass(frozen=True)
class Options:
    json: bool = False
    seeds: tuple[int, ...] = (1, 3)  # numbers of seeds in one program (loop.over_seeds)
    updates: int = 50
    warmup: int = 3
    ticks: int = 100  # ticks of rows in the replay before timing (1,600 rows >= 1,040)
    tiny: bool = False
    out: str | None = None  # a .json file or a folder; None: stdout only
    env: str | None = None  # a whole run of this env id instead of the update alone
    compiled: str | None = None  # --env: the compiled env to compare with ("" for none)
    stretch: int = 5  # --env: ticks per timed chunk
    rounds: int = 3  # --env: timed chunks after the gate (0: acting alone)
    num_envs: int = 16  # --env
    set: tuple[str, ...] = ()  # --set KEY=VALUE on the benched config (with --env: both runs)
    size: str = SIZE  # model size preset (config.SIZES); --tiny overrides it

    @classmethod
    def of(cls, args) -> Options:
        kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
              if getattr(args, f.name, None) is not None}
        if "out" in kw:
            kw["out"] = str(kw["out"])
        if "seeds" in kw:
            kw["seeds"] = tuple(int(n) for n in kw["seeds"])
        if "set" in kw:
            kw["set"] = tuple(kw["set"])
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
    import jax
    import jax.numpy as jnp

    from dreamerjax.run import loop as loop
    names = tuple(loop.metric_names(setup))
    keys = jnp.stack([jax.random.PRNGKey(s) for s in range(num_seeds)])
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


def compile_worker(cache: str, tiny: bool, seed_counts: list[int],
                   sets: tuple[str, ...] = (), size: str = SIZE) -> dict:
    """Run in a fresh process: compile the update for each seed count against `cache`."""
    import jax
    use_cache(cache)
    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **_: hits.append(1) if event.endswith("/cache_hits") else None)
    setup = make_setup(tiny, tuple(sets), size)
    out = {}
    for n in seed_counts:
        before = len(hits)
        _, secs = compile_update(setup, n)
        out[str(n)] = dict(secs, cache_hits=len(hits) - before)
    return out


def _run_worker(cache: str, tiny: bool, seed_counts, sets=(), size: str = SIZE) -> dict:
    spec = json.dumps({"cache": cache, "tiny": tiny, "seed_counts": list(seed_counts),
                       "sets": list(sets), "size": size})
    worker = [sys.executable, "-m", "dreamerjax.tools.bench", "--compile-worker", spec]
    proc = subprocess.run(worker,
                          capture_output=True, text=True, check=False)
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


def unrolled_flops(setup) -> float:
    """FLOPs of one single-seed update with every scan step counted (pre-optimisation HLO)."""
    with unrolled_scans():
        lowered = update_program(setup).trace(abstract_states(setup, 1)).lower()
    return float(_cost(lowered)["flops"])


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


# ----------------------------------------------------------------------------- driver


def _time_ticks(fill, states, rows_per_call: int, reps: int = 3):
    """(states, rows per second of the acting program `fill`): median of `reps` calls."""
    import jax
    secs = []
    for _ in range(reps):
        t = time.perf_counter()
        states = jax.block_until_ready(fill(states))
        secs.append(time.perf_counter() - t)
    return states, rows_per_call / float(np.median(secs))


def _time_seed_counts(setup, counts: list[int], opts: Options) -> dict:
    """Per seed count: its update timed on a filled replay; for the first count also the
    acting program's rows per second and XLA's cost analysis of its update."""
    import jax
    out = {"per_seed": {}, "rss": {}}
    for n in counts:
        compiled, _ = compile_update(setup, n)
        fill = ticks_program(setup, opts.ticks)
        states = jax.block_until_ready(fill(init_states(setup, n)))
        if n == counts[0]:
            out["compiled_xla"] = _cost(compiled)
            states, out["rows_per_s"] = _time_ticks(
                fill, states, opts.ticks * setup.run.num_envs * n)
            out["rows_seeds"] = n
        states, secs = time_updates(compiled, states, opts.warmup, opts.updates)
        if (np.asarray(states.bad_update) >= 0).any():
            raise FloatingPointError(f"non-finite loss during the {n}-seed bench")
        out["per_seed"][str(n)] = _stats(np.asarray(secs) / n)
        out["rss"][str(n)] = _rss_mib()  # cumulative: the process's peak so far
        del states
    return out


def _config_of(setup, opts: Options) -> dict:
    return {"env": ENV, "size": "tiny" if opts.tiny else opts.size,
            "batch_size": setup.run.batch_size, "batch_length": setup.run.batch_length,
            "imag_length": setup.config.agent.imag_length,
            "num_envs": setup.run.num_envs, "updates": opts.updates,
            "compute_dtype": setup.config.agent.compute_dtype, "set": list(opts.set),
            "warmup": opts.warmup, "replay_rows": opts.ticks * setup.run.num_envs}


def run_bench(opts: Options) -> dict:
    """Every figure of one bench run (see the module docstring)."""
    counts = list(dict.fromkeys(opts.seeds))
    cache = tempfile.mkdtemp(prefix="dreamerjax-bench-cache-")
    # Cold and warm compiles each in a fresh process; the cold one starts from an empty
    # cache directory, the warm one reads what the cold one wrote.
    cold = _run_worker(cache, opts.tiny, counts, opts.set, opts.size)
    warm = _run_worker(cache, opts.tiny, counts, opts.set, opts.size)
    use_cache(cache)  # so this process reuses the programs compiled above

    setup = make_setup(opts.tiny, opts.set, opts.size)
    info = machine()
    timed = _time_seed_counts(setup, counts, opts)
    # FLOPs of one seed's update (n seeds in one program do n times this).
    flops_xla = float(timed["compiled_xla"]["flops"]) / counts[0]
    flops = unrolled_flops(setup)
    peak = matmul_peak()
    report_s, report_bytes = report_seconds()
    achieved = flops / timed["per_seed"][str(counts[0])]["median"]
    return {
        "config": _config_of(setup, opts),
        "machine": info,
        "seconds_per_update_per_seed": timed["per_seed"],
        "compile_seconds_cold": cold[str(counts[0])]["total"],
        "compile_seconds_warm": warm[str(counts[0])]["total"],
        "compile_by_seeds": {"cold": _strip(cold), "warm": _strip(warm)},
        "rows_per_s_no_update": timed["rows_per_s"],
        "rows_per_s_seeds": timed["rows_seeds"],
        "flops_per_update_xla": flops_xla,
        "flops_per_update": flops,
        "flops_analytic": analytic_flops(setup),
        "matmul_peak_flops_per_s": peak,
        "matmul_n": MATMUL_N,
        "achieved_flops_per_s": achieved,
        "efficiency": achieved / peak,
        "peak_rss_mib": _rss_mib(),
        "peak_rss_mib_after_seeds": timed["rss"],
        "compile_peak_rss_mib": warm["children_peak_rss_mib"],
        "report_seconds_wide": report_s,
        "report_bytes_wide": report_bytes,
        "report_dims": REPORT_DIMS,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "dreamerjax bench " + " ".join(_argv(opts)),
    }


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
    if opts.tiny:
        out.append("--tiny")
    if opts.size != Options.size:
        out += ["--size", opts.size]
    if opts.seeds != Options.seeds:
        out += ["--seeds", *map(str, opts.seeds)]
    if opts.updates != Options.updates:
        out += ["--updates", str(opts.updates)]
    if opts.warmup != Options.warmup:
        out += ["--warmup", str(opts.warmup)]
    for item in opts.set:
        out += ["--set", item]
    return out


# ----------------------------------------------------------------------------- output


def _g(x: float) -> str:
    return f"{x / 1e9:.2f} G"


def table_rows(r: dict) -> list[tuple[str, str]]:
    """(label, value) pairs of one result."""
    rows = []
    for n, s in r["seconds_per_update_per_seed"].items():
        rows.append((f"s / update / seed, {n} seed{'s' if n != '1' else ''}",
                     f"{s['median']:.3f} (p10 {s['p10']:.3f}, p90 {s['p90']:.3f})"))
    rows += [
        ("compile, cold (s)", f"{r['compile_seconds_cold']:.1f}"),
        ("compile, warm cache (s)", f"{r['compile_seconds_warm']:.1f}"),
        (f"rows / s, tick without updates ({r.get('rows_per_s_seeds', 1)} seed)",
         f"{r['rows_per_s_no_update']:,.0f}"),
        ("FLOPs / update (all scan steps)", _g(r["flops_per_update"])),
        ("FLOPs / update (XLA, loop bodies once)", _g(r["flops_per_update_xla"])),
        ("achieved FLOP/s (1 seed)", _g(r["achieved_flops_per_s"])),
        (f"f32 matmul peak FLOP/s ({r.get('matmul_n', MATMUL_N)}^3)",
         _g(r["matmul_peak_flops_per_s"])),
        ("efficiency (achieved / peak)", f"{100 * r['efficiency']:.1f} %"),
    ]
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
    if opts.env is not None:
        return env_main(opts)
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
        print(json.dumps(compile_worker(spec["cache"], spec["tiny"], spec["seed_counts"],
                                        tuple(spec.get("sets", ())), spec.get("size", SIZE))))
        sys.exit(0)
