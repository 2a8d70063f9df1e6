"""One convolution layer of the image encoder on this backend, forward and forward +
backward: jax's own convolution and nets.conv2d (its kernel gradient as an NHWC / HWIO
convolution) at the top level and inside a loop of two steps (as the training chunk runs
its updates), and two seeds each with its own kernel, vmapped (a grouped convolution) or
mapped one after the other (lax.map, run.seed_loop=map). Prints one JSON object (seconds,
the best of --repeats calls after a compile).

    .venv/bin/python benchmarks/experiments/conv_vmap.py       # the tiny encoder's 2nd layer
    .venv/bin/python benchmarks/experiments/conv_vmap.py --frames 1024 --res 64 --cin 3 --cout 16
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp

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


def _grads(conv):
    return jax.grad(lambda x, k: conv(x, k).sum(), argnums=(0, 1))


def _in_loop(fn):
    """fn(x, k) twice in a fori_loop, summed (what the update loop of a chunk does)."""
    def run(x, k):
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, x, k))
        return jax.lax.fori_loop(0, 2, lambda i, c: jax.tree.map(jnp.add, c, fn(x, k)), zeros)
    return run


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
    from dreamerjax.algo import nets
    from dreamerjax.run import xla_tuning
    xla_tuning.apply()  # the command line's XLA flags

    def jax_conv(x, k):
        return jax.lax.conv_general_dilated(x, k, (a.stride,) * 2, "SAME", dimension_numbers=DN)

    def ours(x, k):
        args = nets.same_conv_args(x.shape[1:3], a.kernel, a.stride, False)
        return nets.conv2d(x, k, *args)

    def mapped(fn):
        return lambda x, k: jax.lax.map(lambda xk: fn(*xk), (x, k))

    kx, kk = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(kx, (2, a.frames, a.res, a.res, a.cin))
    k = jax.random.normal(kk, (2, a.kernel, a.kernel, a.cin, a.cout))
    one, two = (x[0], k[0]), (x, k)
    out = {"shape": vars(a), "backend": jax.default_backend(),
           "one_seed_forward_s": _best(jax_conv, one, a.repeats),
           "one_seed_forward_backward_s": _best(_grads(jax_conv), one, a.repeats),
           "one_seed_forward_backward_ours_s": _best(_grads(ours), one, a.repeats),
           "loop_of_2_forward_backward_s": _best(_in_loop(_grads(jax_conv)), one, a.repeats),
           "loop_of_2_forward_backward_ours_s": _best(_in_loop(_grads(ours)), one, a.repeats),
           "two_seeds_vmapped_forward_s": _best(jax.vmap(ours), two, a.repeats),
           "two_seeds_vmapped_forward_backward_ours_s": _best(
               jax.vmap(_grads(ours)), two, a.repeats),
           "two_seeds_mapped_forward_s": _best(mapped(ours), two, a.repeats),
           "two_seeds_mapped_forward_backward_ours_s": _best(
               mapped(_grads(ours)), two, a.repeats),
           "vmapped_is_grouped": "feature_group_count" in
           jax.jit(jax.vmap(jax_conv)).lower(x, k).as_text()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
