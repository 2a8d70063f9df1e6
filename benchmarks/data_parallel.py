"""One seed trained data-parallel over N devices: what a whole run's chunks cost at N = 1,
2, 4, ... (prints JSON; asserts nothing).

    python benchmarks/data_parallel.py [--devices 1 2 4] [--tiny | --size 12m]
        [--rounds 3] [--stretch 5] [--set KEY=VALUE ...] [--limit S] [--out FILE]

The configuration is the CartPole protocol's (make_config("CartPole-v1", size="1m"): 16
envs, batch 16 x 64, train ratio 512, one seed; --tiny for the tiny network, --size for
another preset) with jax.train_devices = [0 .. N-1], so the seed's envs, replay and batch
are split over a 'data' mesh axis of N devices and the gradients averaged over it: the
global batch stays 16 x 64 (strong scaling). Each N runs in a fresh worker process (cold
compile, its own peak RSS) through the run's own Trainer (driver.make_trainer, via
dreamerjax/tools/bench/whole_run.py's _Run and gate_chunks, as `dreamerjax bench --env`
times a run), chunk by chunk, each chunk `--stretch` ticks: the chunks before the replay's
gate only act; the `--rounds` chunks after it (acting, inserting and the 8 updates owed per
tick) are timed. Per N: compile seconds of the first chunk (JAX's tracing, lowering and XLA
compile events during it), its wall seconds, seconds per timed chunk, updates and rows per
second of the timed chunks, the speed-up of updates per second against N = 1, peak RSS (and
the devices' peak memory where the backend reports it). Without --devices: N = 1, then the
powers of two up to the device count the first worker sees. With --out the file is
rewritten after every N, so a run cut short keeps the Ns it finished; --limit S stops a
worker that would run past S seconds from the start and ends the list there.

Mock CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=N, set before JAX
starts) only check that this runs: the N devices share the same cores, so their figures
are no speed claim. The speed-up means something only on N real accelerators.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "benchmarks/data_parallel.py"
ENV = "CartPole-v1"
COMPILE_EVENTS = ("jaxpr_trace_duration", "jaxpr_to_mlir_module_duration",
                  "backend_compile_duration")


# ----------------------------------------------------------------------------- worker


def measure(spec: dict) -> dict:
    """One N in this process: the run's chunks through its Trainer, the timed ones after
    the replay's gate summed (module docstring)."""
    import jax
    import numpy as np
    from jax import monitoring

    from dreamerjax.tools import bench

    n = int(spec["data_devices"])
    events: dict[str, float] = {}

    def listener(name: str, secs: float, **_) -> None:
        key = name.rsplit("/", 1)[-1]
        events[key] = events.get(key, 0.0) + secs

    monitoring.register_event_duration_secs_listener(listener)
    devices = ",".join(str(i) for i in range(n))
    opts = bench.Options(tiny=spec["tiny"], size=spec["size"], rounds=spec["rounds"],
                         stretch=spec["stretch"],
                         set=(*spec["set"], f"jax.train_devices=[{devices}]"))
    gate = bench.gate_chunks(opts)
    chunks = gate + opts.rounds
    load0 = os.getloadavg()
    run = bench._Run(ENV, opts, chunks)
    before = dict(events)
    run.chunk()
    first = {k: events.get(k, 0.0) - before.get(k, 0.0) for k in events}
    after_first = dict(events)
    for _ in range(chunks - 1):
        run.chunk()
    later = sum(events.get(k, 0.0) - after_first.get(k, 0.0) for k in COMPILE_EVENTS)
    timed = run.chunks[gate:]
    secs = sum(c["seconds"] for c in timed)
    updates = sum(c["updates"] for c in timed)
    rows = sum(c["rows"] for c in timed)
    setup, trainer = run.setup, run.trainer
    used = jax.devices()[:n]
    peaks = []
    for d in used:
        try:
            stats = d.memory_stats() or {}
        except Exception:  # noqa: BLE001 - a backend without memory statistics
            stats = {}
        peaks.append(stats["peak_bytes_in_use"] / 2**20 if "peak_bytes_in_use" in stats
                     else None)
    return {
        "data_devices": n,
        "mesh": dict(trainer.mesh.shape) if trainer.mesh is not None else None,
        "devices_used": [getattr(d, "device_kind", str(d)) for d in used],
        "envs_per_device": setup.run.num_envs // n,
        "batch_per_device": setup.run.batch_size // n,
        "init_seconds": run.init_seconds,
        "compile_seconds": sum(first.get(k, 0.0) for k in COMPILE_EVENTS),
        "compile_events_s": {k: round(first.get(k, 0.0), 3) for k in COMPILE_EVENTS},
        "compile_seconds_later_chunks": later,  # ~0 unless a later chunk recompiled
        "first_chunk_seconds": run.chunks[0]["seconds"],
        "gate_chunks": gate,
        "timed_chunks": len(timed),
        "seconds_per_chunk": secs / len(timed),
        "seconds_per_chunk_each": [c["seconds"] for c in timed],
        "updates_per_chunk": updates / len(timed),
        "updates_per_s": updates / secs,
        "rows_per_s": rows / secs,
        "updates_per_s_median_chunk": float(np.median(
            [c["updates"] / c["seconds"] for c in timed])),
        "peak_rss_mib": bench._rss_mib(),
        "device_peak_mib": peaks,
        "loadavg_1m": [load0[0], os.getloadavg()[0]],
        "config": {"env": ENV, "size": "tiny" if spec["tiny"] else spec["size"],
                   "num_envs": setup.run.num_envs, "batch_size": setup.run.batch_size,
                   "batch_length": setup.run.batch_length,
                   "train_ratio": setup.run.train_ratio,
                   "compute_dtype": setup.config.agent.compute_dtype, "seeds": 1,
                   "stretch_ticks": opts.stretch, "rounds": opts.rounds,
                   "set": list(spec["set"])},
        "machine": bench.machine(),
        "device_kinds": [getattr(d, "device_kind", str(d)) for d in jax.devices()],
    }


# ----------------------------------------------------------------------------- parent


def portable_argv(argv: list[str]) -> list[str]:
    """The command line with no absolute path: one under the repository relative to it,
    any other by its name alone."""
    def clean(token: str) -> str:
        head, eq, tail = token.partition("=") if token.startswith("-") else ("", "", token)
        if not os.path.isabs(tail):
            return token
        path = Path(tail)
        rel = os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else path.name
        return head + eq + rel
    return [SCRIPT, *map(clean, argv)]


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _worker(spec: dict, timeout: float | None) -> dict:
    """measure(spec) in a fresh process; on failure an entry saying why."""
    n = spec["data_devices"]
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-2000:]
        return {"data_devices": n, "error": f"timeout after {timeout:.0f} s",
                "stderr_tail": tail.decode(errors="replace") if isinstance(tail, bytes)
                else tail}
    sys.stderr.write(proc.stderr)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"data_devices": n, "error": f"worker exited {proc.returncode}",
                "stderr_tail": proc.stderr[-2000:]}
    out = json.loads(lines[-1])
    out["worker_seconds"] = time.perf_counter() - t
    return out


def _write(result: dict, path: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)


def run(args, argv: list[str]) -> dict:
    start = time.monotonic()
    base = {"tiny": args.tiny, "size": args.size, "rounds": args.rounds,
            "stretch": args.stretch, "set": list(args.set)}
    result = {
        "what": "one seed trained data-parallel over N devices: the CartPole protocol's "
                "run chunks after the replay's gate (benchmarks/data_parallel.py)",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _git_commit(), "argv": portable_argv(argv),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "config": None, "machine": None, "device_kinds": None, "runs": [], "speedup": {}}
    pending = list(args.devices) if args.devices else [1]
    while pending:
        n = pending.pop(0)
        timeout = None
        if args.limit:
            timeout = args.limit - (time.monotonic() - start)
            if timeout < 5:
                result["runs"].append({"data_devices": n, "error": "no time left (--limit)"})
                break
        r = _worker(dict(base, data_devices=n), timeout)
        if "error" not in r:
            for key in ("config", "machine", "device_kinds"):
                if result[key] is None:
                    result[key] = r[key]
                r.pop(key)
            if not args.devices and n == 1:  # the powers of two the machine holds
                count = len(result["device_kinds"])
                pending = [2 ** k for k in range(1, count.bit_length())]
        result["runs"].append(r)
        base_ups = next((x["updates_per_s"] for x in result["runs"]
                         if x["data_devices"] == 1 and "updates_per_s" in x), None)
        result["speedup"] = {str(x["data_devices"]): x["updates_per_s"] / base_ups
                             for x in result["runs"] if base_ups and "updates_per_s" in x}
        if args.out:
            _write(result, args.out)
        if "timeout" in r.get("error", ""):
            break
    if result["machine"] and result["machine"]["backend"] == "cpu" and len(
            result["device_kinds"]) > 1:
        result["note"] = ("mock CPU devices (xla_force_host_platform_device_count) share "
                          "the same cores: these figures check that the run works, they "
                          "are no speed claim")
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, nargs="+", default=None,
                   help="data devices N to time (default: 1, 2, 4, ... up to the count)")
    p.add_argument("--tiny", action="store_true", help="the tiny network")
    p.add_argument("--size", default="1m", help="model size preset (default 1m)")
    p.add_argument("--rounds", type=int, default=3, help="timed chunks after the gate")
    p.add_argument("--stretch", type=int, default=5, help="ticks per chunk")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config item, as `dreamerjax train --set`")
    p.add_argument("--limit", type=float, default=0.0,
                   help="seconds from the start after which no worker may run (0: none)")
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(json.loads(args.worker))))
        return 0
    if args.rounds < 1 or args.stretch < 1:
        p.error("--rounds and --stretch must be at least 1")
    from experiments._emit import emit  # benchmarks/ is first on sys.path as a script
    return emit(run(args, argv), args.out)


if __name__ == "__main__":
    sys.exit(main())
