"""Milliseconds per tick of N dm_control host envs (proprioceptive, random actions): all
stepped one after the other in this process (the default) and each in its own worker
process (`--driver-parallel`), as the training loop's HostVector holds them.

    MUJOCO_GL=disable python benchmarks/experiments/dmc_host_ticks.py \
        --tasks dmc_cartpole_swingup dmc_walker_walk --envs 48 --out F.json

A tick is one HostCollector.step of all N envs (action repeat 2: two physics steps each).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _emit import emit

from dreamerjax.envs.host import base as host


def ticks(task: str, n: int, parallel: bool, count: int, warm: int = 5) -> dict:
    """Median and mean ms per tick over `count` ticks after `warm` ticks."""
    vec = host.HostVector([host.EnvFactory(task, (("image", False),))] * n,
                          parallel=parallel)
    try:
        col = host.HostCollector(vec)
        col.reset(list(range(n)))
        rng = np.random.default_rng(0)
        dims = vec.spec.action_dims
        times = []
        for i in range(warm + count):
            action = rng.uniform(-1, 1, (n, dims)).astype(np.float32)
            start = time.perf_counter()
            col.step(action)
            if i >= warm:
                times.append(time.perf_counter() - start)
    finally:
        vec.close()
    return {"task": task, "envs": n, "parallel": parallel, "ticks": count,
            "ms_per_tick_median": round(1e3 * float(np.median(times)), 3),
            "ms_per_tick_mean": round(1e3 * float(np.mean(times)), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["dmc_cartpole_swingup"])
    parser.add_argument("--envs", type=int, default=48, help="16 envs x 3 seeds")
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = [ticks(task, args.envs, parallel, args.ticks)
            for task in args.tasks for parallel in (False, True)]
    return emit({"cpu_count": os.cpu_count(), "mujoco_gl": os.environ.get("MUJOCO_GL"),
                 "rows": rows}, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
