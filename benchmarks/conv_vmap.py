"""One convolution layer of the image encoder on this backend: one seed, and two seeds
vmapped (each with its own kernel, as in a vmapped multi-seed run, which makes it a grouped
convolution), forward and forward + backward. Prints one JSON object (seconds, the best of
--repeats calls after a compile) and whether the vmapped program is grouped.

    .venv/bin/python benchmarks/conv_vmap.py                    # the tiny encoder's 2nd layer
    .venv/bin/python benchmarks/conv_vmap.py --frames 1024 --res 64 --cin 3 --cout 16
"""

from __future__ import annotations

import argparse
import json
import time

import jax

DN = ("NHWC", "HWIO", "NHWC")


def _best(fn, args, repeats: int) -> float:
    fn = jax.jit(fn)
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=256)
    p.add_argument("--res", type=int, default=32)
    p.add_argument("--cin", type=int, default=8)
    p.add_argument("--cout", type=int, default=12)
    p.add_argument("--kernel", type=int, default=5)
    p.add_argument("--stride", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    from dreamerjax import xla_tuning  # the command line's XLA flags
    xla_tuning.apply()

    def conv(x, k):
        return jax.lax.conv_general_dilated(x, k, (a.stride,) * 2, "SAME", dimension_numbers=DN)

    def both(x, k):
        return jax.grad(lambda x, k: conv(x, k).sum(), argnums=(0, 1))(x, k)

    kx, kk = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(kx, (2, a.frames, a.res, a.res, a.cin))
    k = jax.random.normal(kk, (2, a.kernel, a.kernel, a.cin, a.cout))
    out = {"shape": vars(a), "backend": jax.default_backend(),
           "one_seed_forward_s": _best(conv, (x[0], k[0]), a.repeats),
           "one_seed_forward_backward_s": _best(both, (x[0], k[0]), a.repeats),
           "two_seeds_vmapped_forward_s": _best(jax.vmap(conv), (x, k), a.repeats),
           "two_seeds_vmapped_forward_backward_s": _best(jax.vmap(both), (x, k), a.repeats),
           "vmapped_is_grouped": "feature_group_count" in
           jax.jit(jax.vmap(conv)).lower(x, k).as_text()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
