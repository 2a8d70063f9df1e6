"""The update bench (`dreamerjax bench` without --env or --sweep): every figure of one
run, each number of seeds of --seeds timed through the run's trainer (run_bench)."""

from __future__ import annotations

import tempfile

from dreamerjax.tools.bench.flops import analytic_flops, update_flops, with_flops
from dreamerjax.tools.bench.options import (
    DEFAULT_SEEDS,
    ENV,
    MATMUL_N,
    REPORT_DIMS,
    TINY_SEEDS,
    Options,
    _argv,
)
from dreamerjax.tools.bench.programs import _run_worker, measure_point, use_cache
from dreamerjax.tools.bench.timing import _now, _rss_mib, machine, matmul_peak, report_seconds


def seed_counts(opts: Options) -> list[int]:
    """--seeds resolved: the numbers of seeds timed, each once (DEFAULT_SEEDS; --tiny, the
    bench's smoke check: TINY_SEEDS)."""
    return list(dict.fromkeys(opts.seeds or (TINY_SEEDS if opts.tiny else DEFAULT_SEEDS)))


def compile_mode(opts: Options) -> str:
    """--compile resolved: children (cold and warm figures from fresh processes) on a CPU,
    in-process elsewhere (a TPU opens in one process at a time; an accelerator's compile
    children cost minutes each) and for --tiny, the bench's smoke check: its programs
    compile once, here, where children compile them twice more (most of its minutes on a
    2-core CPU)."""
    import jax
    backend = jax.default_backend()
    if opts.compile == "children" and backend in ("tpu",):
        raise ValueError("--compile children: a TPU opens in one process at a time; use "
                         "--compile in-process (the default off a CPU)")
    if opts.compile == "auto":
        return "children" if backend == "cpu" and not opts.tiny else "in-process"
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
    counts = seed_counts(opts)
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
    points, rss, plan = {}, {}, None
    for n in counts:  # one plan: the first count's, for every other count (plan.for_seeds)
        points[str(n)] = measure_point(opts, opts.size, None, n, like=plan)
        plan = points[str(n)]["_plan"]
        rss[str(n)] = _rss_mib()  # cumulative: the process's peak so far
    setup = points[str(counts[0])]["_setup"]
    for p in points.values():
        p.pop("_setup", None)
        p.pop("_plan", None)
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


def _strip(worker: dict) -> dict:
    return {k: v for k, v in worker.items() if k != "children_peak_rss_mib"}
