"""Seconds per update of the run's trainer with the agent's time scans unrolled k steps
(XLA's `unroll` of jax.lax.scan: the same operations per step, fewer loop iterations, so
more fusion across steps and fewer launches), one JSON line per (size, dtype, seeds, k).

    python benchmarks/scan_unroll.py --points 1m:float32:3 12m:bfloat16:16 --unroll 1 4 16

Only scans traced from the algorithm (dreamerjax.algo: the world model's observe over
the batch's time axis, imagination, the returns) are unrolled; the run's tick and chunk
loops are left as they are. Figures come from `dreamerjax bench`'s own measure_point
(the run's plan and trainer), so they are the ones `bench --sweep` prints for k = 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def algo_scans_unrolled(k: int):
    """While inside: jax.lax.scan called from dreamerjax.algo modules unrolls `k` steps."""
    from dreamerjax.tools.bench.flops import unrolled_scans
    return unrolled_scans(k, within="dreamerjax.algo")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", nargs="+", default=["1m:float32:3"],
                        help="SIZE:DTYPE:SEEDS items (SIZE tiny: the tiny network)")
    parser.add_argument("--unroll", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--updates", type=int, default=24)
    parser.add_argument("--stretch", type=int, default=2)
    parser.add_argument("--out", default=None, help="a .jsonl file appended to")
    args = parser.parse_args(argv)

    import gc

    import jax

    from dreamerjax.tools.bench.options import Options
    from dreamerjax.tools.bench.programs import measure_point
    for item in args.points:
        size, dtype, seeds = item.split(":")
        opts = Options(updates=args.updates, warmup=0, stretch=args.stretch,
                       tiny=size == "tiny")
        for k in args.unroll:
            t0 = time.perf_counter()
            with algo_scans_unrolled(k):
                point = measure_point(opts, "1m" if opts.tiny else size, dtype, int(seeds))
            point.pop("_setup")
            line = {"size": size, "dtype": dtype, "seeds": int(seeds), "unroll": k,
                    "backend": jax.default_backend(),
                    "device_kind": jax.devices()[0].device_kind,
                    "seconds_per_update": point["seconds_per_update"],
                    "compile_seconds": point["compile_seconds"],
                    "wall_s": time.perf_counter() - t0}
            print(json.dumps(line), flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(line) + "\n")
            gc.collect()
            jax.clear_caches()
    return 0


if __name__ == "__main__":
    sys.exit(main())
