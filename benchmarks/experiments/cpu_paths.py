"""The update's compute dtype and XLA:CPU's matmul libraries, alternated on one machine.

    python benchmarks/experiments/cpu_paths.py --rounds 2 --updates 20 \
        --out results/bench/cpu_paths.json

Each arm is one `dreamerjax bench --json --seeds 1` process (the protocol's 1m CartPole
update) with a compute dtype and XLA options: float32 and bfloat16 (the reference's default,
configs.yaml:24 at 29eb964) on XLA's default path (dots on YNNPACK), and bfloat16 with
oneDNN taking the dots instead (`--xla_cpu_use_onednn` with YNNPACK's dot fusions off;
oneDNN has AMX-BF16 kernels for bfloat16 operands where the CPU has them). The arms run in
turn, round after round, so drift in the machine's load falls on every arm alike; every
process's figures, the CPU's flags and the load averages go into the JSON. Before the
rounds, one [16384 x 640] x [640 x 640] product per arm (the size of the heads' first layer
on the imagined states) is compiled and timed alone, with the operand dtype its matmul gets
in XLA's optimised program: whether a bfloat16 dot reaches the library as bfloat16 or is
converted to float32 first. Prints the JSON; changes nothing of dreamerjax's defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# YNNPACK's dot fusions off (and its reductions, as dreamerjax's own tuning has them), so
# that oneDNN's library rewriter is the one to take the dots.
ONEDNN = ("--xla_cpu_experimental_ynn_fusion_type=-dot,-reduce --xla_cpu_use_onednn=true "
          "--xla_cpu_experimental_onednn_fusion_type=dot")
ARMS = {  # name: (compute dtype, XLA options added to XLA_FLAGS)
    "float32": ("float32", ""),
    "bfloat16": ("bfloat16", ""),
    "bfloat16+onednn": ("bfloat16", ONEDNN),
}

DOT = """
import json, sys, time
import jax, jax.numpy as jnp
dtype = jnp.dtype(sys.argv[1])
a = jnp.ones((16384, 640), dtype)
b = jnp.ones((640, 640), dtype)
f = jax.jit(lambda a, b: a @ b).lower(a, b).compile()
dots = [line.split("=", 1)[1].split("{")[0].strip() for line in f.as_text().splitlines()
        if " dot(" in line]
f(a, b).block_until_ready()
times = []
for _ in range(20):
    t = time.perf_counter()
    f(a, b).block_until_ready()
    times.append(time.perf_counter() - t)
best = min(times)
print(json.dumps({"s_best": best, "gflops_best": 2 * 16384 * 640 * 640 / best / 1e9,
                  "optimised_dot_result_types": dots,
                  "converts_in_program": f.as_text().count(" convert(")}))
"""


def _env(options: str) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = " ".join(x for x in (env.get("XLA_FLAGS", ""), options) if x)
    return env


def _last_json(text: str) -> dict:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON in the output:\n{text[-2000:]}")


def dot(name: str) -> dict:
    dtype, options = ARMS[name]
    out = subprocess.run([sys.executable, "-c", DOT, dtype], env=_env(options),
                         capture_output=True, text=True, check=True)
    return _last_json(out.stdout)


def update(name: str, updates: int) -> dict:
    dtype, options = ARMS[name]
    argv = [sys.executable, "-m", "dreamerjax.tools.cli", "bench", "--json", "--seeds", "1",
            "--updates", str(updates), "--set", f"jax.compute_dtype={dtype}"]
    start, load = time.perf_counter(), os.getloadavg()[0]
    out = subprocess.run(argv, env=_env(options), capture_output=True, text=True,
                         check=True)
    return {"wall_s": time.perf_counter() - start, "load_at_start": load,
            "bench": _last_json(out.stdout)}


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return sorted(f for f in flags if f.startswith(("avx512", "amx")))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--updates", type=int, default=20)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args()
    result = {"machine": platform.processor() or platform.machine(),
              "cpu_flags": cpu_flags(), "cores": os.cpu_count(), "arms": {
                  n: {"dtype": ARMS[n][0], "xla_options": ARMS[n][1]} for n in args.arms},
              "dot": {n: dot(n) for n in args.arms}, "rounds": []}
    for _ in range(args.rounds):
        result["rounds"].append({n: update(n, args.updates) for n in args.arms})
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
