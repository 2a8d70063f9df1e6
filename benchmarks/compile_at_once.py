"""Seconds to compile a run's programs (init, chunk, eval, report) one after another
against several at once (run/precompile.compile_trainer's `workers`), each in a fresh
process with no persistent cache, the two alternated; one JSON object.

    python benchmarks/compile_at_once.py [--env CartPole-v1] [--size 1m] [--seeds 3]
        [--set KEY=VALUE ...] [--workers 4] [--pairs 2] [--out FILE]

A run's precompile child compiles this way, and so does a run on a TPU, where no child can
open the chip, in its own process (run/precompile.compile_here: the trainer then calls the
executables).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, sys, time
import jax
from dreamerjax.config.resolve import make_config
from dreamerjax.run import plan as plan_lib, precompile, trainers
a = json.loads(sys.argv[1])
config = make_config(a["env"], size=a["size"], sets=a["sets"])
plan = plan_lib.make_plan(config, tuple(range(a["seeds"])), 1)
trainer = trainers.CompiledTrainer(plan)
t = time.perf_counter()
secs = precompile.compile_trainer(trainer, True, a["workers"])
print("RESULT " + json.dumps({"backend": jax.default_backend(), "wall": time.perf_counter() - t,
                              "device_kind": jax.devices()[0].device_kind, **secs}))
"""


def one(args, workers: int) -> dict:
    spec = {"env": args.env, "size": args.size, "sets": args.set, "seeds": args.seeds,
            "workers": workers}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True,
                          text=True, check=False, env={**os.environ,
                                                       "JAX_ENABLE_COMPILATION_CACHE": "false"})
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line.removeprefix("RESULT "))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--size", default="1m")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    runs = []
    for _ in range(args.pairs):
        for workers in (1, args.workers):
            runs.append({"workers": workers, **one(args, workers)})
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    walls = {w: [r["wall"] for r in runs if r["workers"] == w] for w in (1, args.workers)}
    result = {"command": ["python", "benchmarks/compile_at_once.py", *(argv or sys.argv[1:])],
              "env": args.env, "size": args.size, "seeds": args.seeds, "sets": args.set,
              "cpu_count": os.cpu_count(), "runs": runs,
              "ratio_serial_over_at_once": [a / b for a, b in zip(walls[1], walls[args.workers],
                                                                  strict=True)]}
    from experiments._emit import emit  # benchmarks/ is first on sys.path as a script

    return emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
