"""nets.conv2d: the CNN's convolutions with the kernel gradient written as an NHWC / HWIO
convolution (XLA:CPU ran jax's own form in its naive emitter inside loops; the speed is
benchmarks/experiments/conv_vmap.py's, results/bench/LOG.md). Its forward and gradients
equal jax's own (jax.lax.conv_general_dilated, jax.lax.conv_transpose) bitwise."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.algo import nets

DN = ("NHWC", "HWIO", "NHWC")

# (frames, res, cin, cout, kernel, stride, transposed): the encoder's strided and unit-
# stride layers, the decoder's transposed ones, odd resolutions and an even kernel.
CASES = [(6, 16, 3, 4, 5, 2, False), (4, 9, 2, 3, 5, 2, False), (3, 12, 4, 2, 5, 1, False),
         (4, 10, 3, 5, 4, 2, False), (6, 8, 4, 3, 5, 2, True), (4, 5, 3, 2, 4, 2, True),
         (3, 7, 2, 3, 5, 1, True)]


def _jax_conv(x, k, stride, transp):
    if transp:
        return jax.lax.conv_transpose(x, k, (stride, stride), "SAME", dimension_numbers=DN)
    return jax.lax.conv_general_dilated(x, k, (stride, stride), "SAME", dimension_numbers=DN)


def _ours(x, k, stride, transp):
    args = nets.same_conv_args(x.shape[1:3], k.shape[0], stride, transp)
    return nets.conv2d(x, k, *args)


def _loss_grads(conv, stride, transp):
    # a loss whose cotangent differs per output element, so that every sum is exercised
    def loss(x, k):
        y = conv(x, k, stride, transp)
        return (y * jnp.sin(jnp.arange(y.size, dtype=y.dtype).reshape(y.shape))).sum()
    return jax.jit(jax.grad(loss, argnums=(0, 1)))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_forward_and_gradients_equal_jax_bitwise(case, dtype):
    n, res, cin, cout, k, stride, transp = case
    kx, kk = jax.random.split(jax.random.PRNGKey(sum(case)))
    x = jax.random.normal(kx, (n, res, res, cin), dtype)
    w = jax.random.normal(kk, (k, k, cin, cout), dtype)
    want = jax.jit(_jax_conv, static_argnums=(2, 3))(x, w, stride, transp)
    got = jax.jit(_ours, static_argnums=(2, 3))(x, w, stride, transp)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    for a, b in zip(_loss_grads(_ours, stride, transp)(x, w),
                    _loss_grads(_jax_conv, stride, transp)(x, w), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
