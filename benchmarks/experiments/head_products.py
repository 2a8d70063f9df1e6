"""The heads' first-layer products over the 16,384 imagined states of the protocol's 1m
update, timed alone on this CPU: the five [16384, 640] x [640, 64] forward products
separately and as one [640, 320] product, RMSNorm + SiLU on their output, and the weight
gradient [16384, 640]^T [16384, 64] in the form XLA gets from JAX's transpose rule and as
g^T x ([64, 640]). Median milliseconds of --reps calls per form; prints one JSON object.

    python benchmarks/experiments/head_products.py [--reps 30] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _emit import emit

from dreamerjax.run import xla_tuning

xla_tuning.apply()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from dreamerjax.algo import numerics as nm  # noqa: E402

ROWS, FEAT, UNITS, HEADS = 16384, 640, 64, 5  # imagined states, deter + stoch, 1m units


def median_ms(fn, *args, reps: int) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((ROWS, FEAT), np.float32))
    ws = [jnp.asarray(rng.standard_normal((FEAT, UNITS), np.float32) * 0.05)
          for _ in range(HEADS)]
    g = jnp.asarray(rng.standard_normal((ROWS, UNITS), np.float32))
    scale = jnp.ones(UNITS)
    forms = {
        "forward_5_products": (jax.jit(lambda x, ws: [x @ w for w in ws]), x, ws),
        "forward_one_640x320_product": (jax.jit(lambda x, w: x @ w), x,
                                        jnp.concatenate(ws, 1)),
        "rmsnorm_silu_16384x64": (jax.jit(lambda h: jax.nn.silu(nm.rms_norm(h, scale))),
                                  x @ ws[0]),
        "weight_grad_as_jax_transposes": (jax.jit(lambda x, g: x.T @ g), x, g),
        "weight_grad_as_gT_x": (jax.jit(
            lambda x, g: lax.dot_general(g, x, (((0,), (0,)), ((), ())))), x, g),
    }
    result = {"command": "python benchmarks/experiments/head_products.py",
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "jax": jax.__version__, "reps": args.reps,
              "median_ms": {name: median_ms(fn, *a, reps=args.reps)
                            for name, (fn, *a) in forms.items()}}
    return emit(result, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
