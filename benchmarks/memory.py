"""Peak RSS of a `dreamerjax train` process, stage by stage (prints JSON; asserts nothing).

    nice -n 5 python benchmarks/memory.py [--seeds 1 3] [--cases cold warm precompile]
        [--updates 8] [--tiny] [--out FILE]

Each case runs `dreamerjax train` (cli.main, the protocol's configuration: CartPole-v1,
1m, 16 envs, batch 16 x 64, 20,000 rows, float32) in a fresh worker process with its own
cache directory (XDG_CACHE_HOME), and records ru_maxrss (getrusage RUSAGE_SELF) and
/proc/self/status VmHWM / VmRSS at each stage: after importing jax + dreamerjax and
running one op, at the precompile child's end, at the end of every XLA compile (jax's
backend-compile event, which also ends a persistent-cache hit, named by function), after
init, after the first chunk ran, after evaluation, the report and the checkpoint of the
first log point, and after the second chunk (which runs on top of what the first log
point's evaluation, report, checkpoint and plots left). The run stops after `--logs`
log points (a SIGTERM, as a user's Ctrl-C would). To keep a case to minutes, each chunk owes only
`--updates` updates (all on its last tick, where the replay is past its gate) instead
of the schedule's 480-1,000: the chunk program is the run's own (the due counts are its
data), so its compile and its per-update temporaries are the run's.

Cases: cold (empty cache, DREAMERJAX_PRECOMPILE=0: the training process compiles, as
before precompile existed), warm (the cache cold filled, DREAMERJAX_PRECOMPILE=0),
precompile (empty cache, the child compiles, the training process loads, glibc's heap
trimmed after each load and before each chunk: precompile.trimming, driver._run).
Suffixes: `+notrim` sets
DREAMERJAX_MALLOC_TRIM=0, `+arena2` MALLOC_ARENA_MAX=2, `+trim` (for cold and warm)
calls malloc_trim(0) after every compile in the worker.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PROTOCOL_ARGS = ["--env", "CartPole-v1", "--size", "1m", "--num-envs", "16",
                 "--steps", "20000", "--eval-every", "2000", "--set", "batch_size=16",
                 "--set", "batch_length=64", "--set", "jax.compute_dtype=float32"]
TINY_ARGS = ["--env", "CartPole-v1", "--tiny", "--num-envs", "4", "--steps", "512",
             "--eval-every", "256", "--eval-episodes", "2"]


def _status() -> dict:
    out = {"maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key] = int(val.split()[0]) / 1024
    except OSError:
        pass
    return out


def worker(spec: dict) -> dict:
    """One case, in this (fresh) process: `dreamerjax train` with stage marks."""
    t0 = time.perf_counter()
    stages = []

    def mark(name, **kw):
        stages.append({"stage": name, "t_s": round(time.perf_counter() - t0, 2),
                       **{k: round(v, 1) for k, v in _status().items()}, **kw})

    trim = None
    if spec.get("trim"):
        import ctypes
        trim = ctypes.CDLL("libc.so.6").malloc_trim

    from dreamerjax.run import xla_tuning
    xla_tuning.apply()  # as cli.main does first
    import jax
    import numpy as np
    jax.block_until_ready(jax.numpy.zeros(4) + 1)
    from dreamerjax.run import driver, precompile, trainers
    from dreamerjax.tools import cli
    mark("import")

    hits = []

    def on_event(event, **_):
        if event.endswith("/cache_hits"):
            hits.append(1)

    def on_duration(event, duration, **kw):
        if event.endswith("backend_compile_duration"):
            if trim is not None:
                trim(0)
            mark(f"compile {kw.get('fun_name', '?')}", seconds=duration,
                 cache_hit=bool(hits))
            hits.clear()

    jax.monitoring.register_event_listener(on_event)
    jax.monitoring.register_event_duration_secs_listener(on_duration)

    orig_pre = precompile.precompile

    def pre(*a, **kw):
        out = orig_pre(*a, **kw)
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        mark("precompile child done", child_peak_mib=child,
             child_wall_s=(out or {}).get("wall_s", 0.0))
        return out

    precompile.precompile = pre

    T = trainers.CompiledTrainer
    orig_chunk, orig_eval, orig_report, orig_init = T.chunk, T.evaluate, T.report, T.init
    updates = int(spec["updates"])

    logs = int(spec.get("logs", 2))

    def chunk(self, states, log_index):
        if updates >= 0:
            t = self.setup.ticks_per_log
            due = np.array(self.updates_due)
            due[log_index * t:(log_index + 1) * t] = 0
            due[(log_index + 1) * t - 1] = updates
            self.updates_due = due
        if spec.get("trimchunk"):
            precompile.malloc_trim()
        states, ends = orig_chunk(self, states, log_index)
        jax.block_until_ready(states)
        mark(f"chunk {log_index} ran")
        if log_index + 1 >= logs:
            signal.raise_signal(signal.SIGTERM)  # the CLI stops after this log point
        return states, ends

    def evaluate(self, *a, **kw):
        out = jax.block_until_ready(orig_eval(self, *a, **kw))
        mark("eval ran")
        return out

    def report(self, *a, **kw):
        out = orig_report(self, *a, **kw)
        mark("report ran")
        return out

    def init(self):
        out = jax.block_until_ready(orig_init(self))
        mark("init ran")
        return out

    T.chunk, T.evaluate, T.report, T.init = chunk, evaluate, report, init
    orig_save = driver.ckpt.save

    def save(*a, **kw):
        out = orig_save(*a, **kw)
        mark("checkpoint saved")
        return out

    driver.ckpt.save = save
    seeds = [str(s) for s in range(int(spec["seeds"]))]
    args = TINY_ARGS if spec.get("tiny") else PROTOCOL_ARGS
    argv = ["train", *args, "--seeds", *seeds, "--out", spec["out"]]
    rc = cli.main(argv)
    mark("end")
    return {"rc": rc, "argv": argv, "stages": stages,
            "peak_mib": max(s["maxrss_mib"] for s in stages),
            "wall_s": round(time.perf_counter() - t0, 1)}


def run_case(name: str, seeds: int, cache: str, opts, env_extra: dict) -> dict:
    out = tempfile.mkdtemp(prefix="dreamerjax-memory-run-")
    spec = {"seeds": seeds, "updates": opts.updates, "tiny": opts.tiny, "out": out,
            "logs": opts.logs,
            "trim": "+trim" in name, "trimchunk": "trimchunk" in name}
    env = dict(os.environ, XDG_CACHE_HOME=cache, **env_extra)
    env.setdefault("DREAMERJAX_PRECOMPILE", "0")
    try:
        proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                              capture_output=True, text=True, env=env, check=False)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if proc.returncode:
        return {"case": name, "seeds": seeds, "error": proc.stderr[-3000:]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"case": name, "seeds": seeds, "env": env_extra, **res}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 3])
    p.add_argument("--cases", nargs="+", default=["cold", "warm", "precompile"])
    p.add_argument("--updates", type=int, default=8)
    p.add_argument("--logs", type=int, default=2, help="log points to run (then stop)")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out")
    opts = p.parse_args()
    if opts.worker:
        print(json.dumps(worker(json.loads(opts.worker))))
        return 0
    import platform
    results = []
    for seeds in opts.seeds:
        cache = tempfile.mkdtemp(prefix="dreamerjax-memory-cache-")
        try:
            for case in opts.cases:
                env = {}
                if case.startswith("precompile"):
                    env["DREAMERJAX_PRECOMPILE"] = "1"
                if "notrim" in case:
                    env["DREAMERJAX_MALLOC_TRIM"] = "0"
                if "arena2" in case:
                    env["MALLOC_ARENA_MAX"] = "2"
                if case != "warm":  # every other case starts from an empty cache
                    shutil.rmtree(cache, ignore_errors=True)
                    os.makedirs(cache)
                r = run_case(case, seeds, cache, opts, env)
                results.append(r)
                print(json.dumps({k: r.get(k) for k in ("case", "seeds", "peak_mib",
                                                        "wall_s", "error")}),
                      file=sys.stderr, flush=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    doc = {"date": time.strftime("%Y-%m-%d"), "machine": {
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "loadavg_1m_at_start": os.getloadavg()[0]}, "updates_in_first_chunk": opts.updates,
        "log_points": opts.logs, "tiny": opts.tiny, "results": results}
    from experiments._emit import emit  # benchmarks/ is first on sys.path as a script

    return emit(doc, opts.out)


if __name__ == "__main__":
    sys.exit(main())
