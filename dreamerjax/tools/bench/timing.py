"""Timing helpers and the machine: a median over timed calls, the float32 matmul peak of
this process, the machine's description, the open-loop report's drawing time, peak RSS."""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import resource
import tempfile
import time

import numpy as np

from dreamerjax.tools.bench.options import MATMUL_N, REPORT_DIMS


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


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
