"""Seconds per update with the seed axis vmapped on one device or sharded over several CPU
devices (as `dreamerjax train --devices N` shards it), programs alternated round by round.

Each case is NxD: N seeds vmapped, sharded over D devices (D = 1: one device). The
program is `dreamerjax bench`'s (sample + update + write-back, 1m CartPole, batch 16 x 65,
float32). Prints a line per round and one JSON object at the end (median seconds per call
and per seed of each case, every call).

    python benchmarks/experiments/seeds_over_devices.py 1x1,2x1,2x2 --rounds 3 --calls 6
    python benchmarks/experiments/seeds_over_devices.py 3x1,3x3 --host-devices 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", help="comma-separated NxD, e.g. 1x1,2x1,2x2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=6, help="timed calls per case per round")
    p.add_argument("--host-devices", type=int, default=2,
                   help="CPU devices to create (XLA_FLAGS, set before jax is imported)")
    p.add_argument("--tiny", action="store_true", help="the tiny network (a smoke check)")
    a = p.parse_args(argv)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_"
                               f"platform_device_count={a.host_devices}")
    import jax

    from dreamerjax.run import loop as loop
    from dreamerjax.run import sharding as sharding_lib
    from dreamerjax.tools import bench

    setup = bench.make_setup(a.tiny)
    cases = a.cases.split(",")
    programs, states = {}, {}
    for case in cases:
        n, d = map(int, case.split("x"))
        st = bench.init_states(setup, n)
        sharding = sharding_lib.seed_sharding(d)
        body = jax.vmap(lambda s: loop.train_once(setup, s))
        if sharding is None:
            fn = jax.jit(body, donate_argnums=0)
        else:
            st = jax.device_put(st, sharding)
            fn = jax.jit(body, donate_argnums=0, in_shardings=sharding,
                         out_shardings=sharding)
        t = time.perf_counter()
        states[case] = jax.block_until_ready(fn(st))
        print(f"{case}: compile + first call {time.perf_counter() - t:.1f} s",
              file=sys.stderr, flush=True)
        programs[case] = fn
    calls = {c: [] for c in cases}
    for r in range(a.rounds):
        for case in cases:
            st = jax.block_until_ready(programs[case](states[case]))  # untimed
            for _ in range(a.calls):
                t = time.perf_counter()
                st = jax.block_until_ready(programs[case](st))
                calls[case].append(time.perf_counter() - t)
            states[case] = st
        print(f"round {r}: " + ", ".join(f"{c} {statistics.median(v):.3f} s"
                                         for c, v in calls.items())
              + f"; load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    print(json.dumps({c: {"median_s": statistics.median(v),
                          "per_seed_s": statistics.median(v) / int(c.split("x")[0]),
                          "calls_s": v} for c, v in calls.items()}))


if __name__ == "__main__":
    main()
