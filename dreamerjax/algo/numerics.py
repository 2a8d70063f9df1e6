"""Numerical building blocks shared by the networks and losses (pure jnp; float32 except
the layers' activations, which are in the compute dtype of their input).

Each function states the reference behaviour it reproduces (danijar/dreamerv3 @29eb964) as
`file:line`. Distribution formulas follow tensorflow-probability 0.24 (JAX substrate), which
the reference uses through `tfd`; where tfp has a particular evaluation order we keep it so
that our float32 results agree with the reference to the last bits where possible.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.config import defaults as config_lib

f32 = jnp.float32
sg = jax.lax.stop_gradient

# tfp's Normal uses the float32 constant 0.5 * log(2 pi) (tfp normal.py `_log_prob`).
_HALF_LOG_2PI = np.float32(0.5 * np.log(2.0 * np.pi))


# --------------------------------------------------------------------------- transforms


def symlog(x: jax.Array) -> jax.Array:
    """sign(x) * log(1 + |x|) (jaxutils.py:76-77)."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


def symexp(x: jax.Array) -> jax.Array:
    """sign(x) * (exp(|x|) - 1), the inverse of symlog (jaxutils.py:80-81)."""
    return jnp.sign(x) * jnp.expm1(jnp.abs(x))


# --------------------------------------------------------------------------- two-hot


@functools.cache
def _twohot_bins_np(n: int) -> np.ndarray:
    """The reference's bins as a host constant, bit for bit.

    The reference builds `symexp(linspace(-20, 0, (n-1)//2 + 1))` inside its network
    (nets.py:467-471) and XLA compiles jnp.linspace as one kernel. In jax 0.4.26 that
    kernel evaluated point j as `-20 * fma(-j, f32(1/div), 1)` (the division by `div`
    turned into a multiplication with the rounded reciprocal and `1 - step` contracted
    into one rounding). We reproduce that grid exactly in float64 arithmetic (every
    intermediate is exact there, so one final rounding equals the fused one), then take
    symexp with XLA's float32 expm1 on the CPU backend. The result equals the fixture
    `twohot.npz:bins_eager` (== `bins_jit`, what training uses) in every bit. Computing
    it once on the host also keeps the bins identical on every accelerator.
    """
    if n < 3 or n % 2 != 1:
        raise ValueError(f"two-hot bins need an odd count >= 3 (the reference's 255), got {n}")
    div = (n - 1) // 2
    recip = np.float32(1.0) / np.float32(div)
    j = np.arange(div, dtype=np.float64)
    one_minus_step = (1.0 - j * np.float64(recip)).astype(np.float32)
    grid = np.append((np.float32(-20.0) * one_minus_step).astype(np.float32), np.float32(0.0))
    try:  # this process's own CPU device (in a multi-host run, devices() lists all hosts')
        device = jax.local_devices(backend="cpu")[0]
    except RuntimeError:  # CPU backend disabled (JAX_PLATFORMS): the default device's expm1
        device = jax.local_devices()[0]
    with jax.ensure_compile_time_eval(), jax.default_device(device):
        half = np.asarray(symexp(jnp.asarray(grid, f32)))
    # Mirror the negative half: exactly antisymmetric, bins[(n-1)//2] == 0.
    bins = np.concatenate([half, -half[:-1][::-1]]).astype(np.float32)
    bins.setflags(write=False)
    return bins


def twohot_bins(n: int = 255) -> jax.Array:
    """Symexp-spaced two-hot bins `[n]`, exactly antisymmetric (nets.py:467-471).

    Returned as a constant (safe to call inside jit); see `_twohot_bins_np` for how the
    reference's float32 values are reproduced bit for bit.
    """
    return jnp.asarray(_twohot_bins_np(int(n)))


def twohot_log_prob(logits: jax.Array, x: jax.Array, bins: jax.Array) -> jax.Array:
    """log p(x) of a two-hot distribution: logits `[..., K]`, x `[...]` -> `[...]`.

    Semantics of the reference (jaxutils.py:255-274): x is split between its two
    neighbouring bins, each weighted by the distance to the other one; the neighbours are
    located by counting bins, so targets beyond the outer bins put all weight on the outer
    bin, and a target exactly on a bin puts all weight on it. As there, the K-wide target
    vector (two one-hots, weighted) is multiplied with `logits - logsumexp(logits)` and
    summed. Gathering the two terms instead gives, on its own, the same gradient with
    respect to the logits bit for bit, but forward values 1-2 ulp off the reference's
    own jitted ones more often (14 % of the two-hot fixture's against 4 %), and a TPU
    spends 11 % of the 12m update in such gathers and their scatters
    (docs/performance.md, "On a TPU").
    """
    k = bins.shape[0]
    assert logits.shape[-1] == k, (logits.shape, k)
    xs = x[..., None]
    left = jnp.clip(jnp.sum(bins <= xs, -1, dtype=jnp.int32) - 1, 0, k - 1)
    right = jnp.clip(k - jnp.sum(bins > xs, -1, dtype=jnp.int32), 0, k - 1)
    hot_left = jax.nn.one_hot(left, k, dtype=logits.dtype)  # [..., K]
    hot_right = jax.nn.one_hot(right, k, dtype=logits.dtype)
    on_bin = left == right
    # One nonzero term each: the sums are the bins' own values, exactly.
    to_left = jnp.where(on_bin, 1.0, jnp.abs(jnp.sum(hot_left * bins, -1) - x))
    to_right = jnp.where(on_bin, 1.0, jnp.abs(jnp.sum(hot_right * bins, -1) - x))
    span = to_left + to_right
    target = (hot_left * (to_right / span)[..., None]
              + hot_right * (to_left / span)[..., None])
    logp = logits - jax.scipy.special.logsumexp(logits, -1, keepdims=True)
    return jnp.sum(target * logp, -1)


def _centre(logits: jax.Array, bins: jax.Array, name: str) -> int:
    """Index of the centre bin (bins[m] == 0); the expectations need an odd bin count."""
    k = logits.shape[-1]
    if k % 2 != 1 or bins.shape[-1] != k:
        raise ValueError(f"{name} needs an odd number of bins, got {k} / {bins.shape}")
    return (k - 1) // 2


@jax.custom_jvp
def twohot_mean(logits: jax.Array, bins: jax.Array) -> jax.Array:
    """Exact expectation sum_j softmax(logits)_j * bins_j: `[..., K]` -> `[...]`.

    Written for antisymmetric bins (`twohot_bins`) in mirror-difference form:
    with m = (K-1)//2 the centre (bins[m] == 0),
        mean = sum_j (p[m+1+j] - p[m-1-j]) * bins[m+1+j],
    where a pair whose logits are equal contributes exactly 0 (a select on the logits,
    not the difference of two computed probabilities: XLA:CPU may evaluate exp on the two
    halves of one softmax with different code, vector body and scalar tail, so equal
    logits need not give bitwise-equal probabilities). Mirror-symmetric logits therefore
    give exactly 0.0 whatever XLA fuses. The reference's pair sum (jaxutils.py:226-243)
    is exact only op by op; under jit XLA contracts each mirror pair into a fused
    multiply-add and it returns noise of up to ~0.3 when the outer bins (|b| up to
    4.85e8) carry mass. See docs/deviations.md D1.
    """
    m = _centre(logits, bins, "twohot_mean")
    probs = jax.nn.softmax(logits, -1)
    mirror = lambda x: x[..., :m][..., ::-1]  # noqa: E731
    diff = probs[..., m + 1:] - mirror(probs)
    diff = jnp.where(logits[..., m + 1:] == mirror(logits), 0.0, diff)
    return jnp.sum(diff * bins[m + 1:], -1)


@twohot_mean.defjvp
def _twohot_mean_jvp(primals, tangents):
    # d mean = sum_j p_j (b_j - mean) dlogit_j + sum_j p_j dbins_j (the select is flat).
    logits, bins = primals
    dlogits, dbins = tangents
    mean = twohot_mean(logits, bins)
    probs = jax.nn.softmax(logits, -1)
    dmean = jnp.sum(probs * (bins - mean[..., None]) * dlogits, -1)
    return mean, dmean + jnp.sum(probs * dbins, -1)


def twohot_mean_pairsum(logits: jax.Array, bins: jax.Array) -> jax.Array:
    """The reference's own summation order for the expectation (jaxutils.py:226-243, odd
    K): the centre term plus, summed over j, the reversed left half's product p_j * b_j
    added to the right half's. `[..., K]` -> `[...]`.

    Exact op by op, but under jit XLA may contract each pair's add with one of its products
    into a fused multiply-add; once the outer bins (|b| up to 4.85e8) carry mass the result
    then carries rounding noise of up to ~0.3 (D1). Kept as an opt-in
    (`AgentConfig.twohot_mean = "pairsum"`, `train --twohot-mean pairsum`) to study what
    that noise does to learning; `twohot_mean` is the default.
    """
    m = _centre(logits, bins, "twohot_mean_pairsum")
    probs = jax.nn.softmax(logits, -1)
    weighted = probs * bins
    centre = weighted[..., m]
    return centre + jnp.sum(weighted[..., :m][..., ::-1] + weighted[..., m + 1:], -1)


# The summations by their config names (config/defaults.py TWOHOT_MEANS, one of which a
# config's agent.twohot_mean names).
TWOHOT_MEANS = dict(zip(config_lib.TWOHOT_MEANS, (twohot_mean, twohot_mean_pairsum),
                        strict=True))


def twohot_mode(logits: jax.Array, bins: jax.Array) -> jax.Array:
    """The reference's `mode()`: the naive sum(probs * bins) (jaxutils.py:252-253)."""
    return jnp.sum(jax.nn.softmax(logits, -1) * bins, -1)


# --------------------------------------------------------------------------- one-hot


def unimix_logits(logits: jax.Array, unimix: float) -> jax.Array:
    """log((1 - u) * softmax(logits) + u / C): `[..., C]` -> `[..., C]`.

    Mixes 1% uniform into categorical latents and discrete actions (nets.py:212-216,
    nets.py:524-528). Identity when unimix == 0, as in the reference.
    """
    if not unimix:
        return logits
    probs = jax.nn.softmax(logits, -1)
    uniform = jnp.ones_like(probs) / probs.shape[-1]
    probs = (1 - unimix) * probs + unimix * uniform
    return jnp.log(probs)


def _straight_through(index: jax.Array, logits: jax.Array) -> jax.Array:
    """One-hot of `index` in the forward pass, gradient of softmax(logits) backward."""
    probs = jax.nn.softmax(logits, -1)
    onehot = sg(jax.nn.one_hot(index, logits.shape[-1], dtype=probs.dtype))
    return onehot + (probs - sg(probs))


def onehot_sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """Straight-through one-hot sample `[..., C]` (jaxutils.py:112-116).

    Forward: a one-hot draw from Categorical(logits); backward: d/dlogits of the probs.
    """
    index = jax.random.categorical(key, logits, axis=-1)
    return _straight_through(index, logits)


def onehot_mode(logits: jax.Array) -> jax.Array:
    """Straight-through one-hot of argmax(logits) `[..., C]`.

    What the reference fixtures use in place of a sample (README (f): the driver patches
    `OneHotDist.sample` to the mode); also a deterministic policy.
    """
    return _straight_through(jnp.argmax(logits, -1), logits)


def onehot_log_prob(logits: jax.Array, value: jax.Array) -> jax.Array:
    """log p(value) of OneHotCategorical(logits): `[..., C]` x `[..., C]` -> `[...]`.

    tfp 0.24 evaluates -softmax_cross_entropy(labels=sg(value), logits) as
    sum(where(value == 0, 0, value * (logits - logsumexp(logits)))); no gradient flows
    into `value`.
    """
    value = sg(value.astype(logits.dtype))
    logits, value = jnp.broadcast_arrays(logits, value)
    log_pred = logits - jax.scipy.special.logsumexp(logits, -1, keepdims=True)
    terms = jnp.where(value == 0, jnp.zeros_like(value), value * log_pred)
    return jnp.sum(terms, -1)


def onehot_entropy(logits: jax.Array) -> jax.Array:
    """Entropy of OneHotCategorical(logits) `[..., C]` -> `[...]` (tfp 0.24 formula).

    lse(logits) - sum(logits * exp(x)) / sum(exp(x)) with x = logits - max(logits).
    """
    m = jnp.max(logits, -1, keepdims=True)
    x = logits - m
    lse = m[..., 0] + jax.scipy.special.logsumexp(x, -1)
    ex = jnp.exp(x)
    weighted = jnp.where(ex == 0, jnp.zeros_like(ex), logits * ex)
    return lse - jnp.sum(weighted, -1) / jnp.sum(ex, -1)


def categorical_kl(logits_p: jax.Array, logits_q: jax.Array) -> jax.Array:
    """KL(p || q) of two OneHotCategoricals, summed over the last axis: `[..., C]` -> `[...]`.

    sum(softmax(p) * (log_softmax(p) - log_softmax(q))) as in tfp 0.24.
    """
    return jnp.sum(
        jax.nn.softmax(logits_p, -1)
        * (jax.nn.log_softmax(logits_p, -1) - jax.nn.log_softmax(logits_q, -1)), -1)


# --------------------------------------------------------------------------- HEAD's outputs

# The distributions of HEAD (embodied/jax/outs.py @e3f0224) write some formulas otherwise
# than tfp did for 29eb964; the same quantities, other float32 roundings.


def categorical_log_prob(logits: jax.Array, onehot: jax.Array) -> jax.Array:
    """sum(log_softmax(logits) * onehot(index)): `[..., C]` -> `[...]` (outs.py:226-228)."""
    return (jax.nn.log_softmax(logits, -1) * sg(onehot.astype(logits.dtype))).sum(-1)


def categorical_entropy(logits: jax.Array) -> jax.Array:
    """-sum(softmax * log_softmax): `[..., C]` -> `[...]` (outs.py:230-234)."""
    return -(jax.nn.softmax(logits, -1) * jax.nn.log_softmax(logits, -1)).sum(-1)


def binary_log_prob(logit: jax.Array, x: jax.Array) -> jax.Array:
    """x log sigmoid(l) + (1 - x) log sigmoid(-l), soft labels allowed (outs.py:197-201)."""
    x = x.astype(f32)
    return x * jax.nn.log_sigmoid(logit) + (1 - x) * jax.nn.log_sigmoid(-logit)


def binary_prob1(logit: jax.Array) -> jax.Array:
    """exp(log p(1)), HEAD's continue prediction `prob(1)` (outs.py:30-31)."""
    return jnp.exp(binary_log_prob(logit, jnp.ones_like(logit)))


def normal_log_prob_scipy(mean: jax.Array, std: jax.Array, x: jax.Array) -> jax.Array:
    """jax.scipy.stats.norm.logpdf summed over the last axis (outs.py:174-176, Agg)."""
    return jax.scipy.stats.norm.logpdf(x.astype(f32), mean, std).sum(-1)


def normal_entropy_e3f0224(std: jax.Array) -> jax.Array:
    """0.5 log(2 pi std^2) + 0.5 summed over the last axis (outs.py:178-179, Agg)."""
    return (0.5 * jnp.log(2 * jnp.pi * jnp.square(std)) + 0.5).sum(-1)


# --------------------------------------------------------------------------- Bernoulli


def bernoulli_log_prob(logit: jax.Array, x: jax.Array) -> jax.Array:
    """log p(x) of Bernoulli(logits=logit), soft labels allowed: `[...]` -> `[...]`.

    tfp 0.24: multiply_no_nan(-softplus(l), 1 - x) + multiply_no_nan(-softplus(-l), x).
    The continue head trains on the soft label (1 - is_terminal) * (1 - 1/horizon).
    """
    x = x.astype(logit.dtype)
    log_p0 = -jax.nn.softplus(logit)
    log_p1 = -jax.nn.softplus(-logit)

    def mul_no_nan(a, b):
        return jnp.where(b == 0, jnp.zeros_like(a * b), a * b)

    return mul_no_nan(log_p0, 1 - x) + mul_no_nan(log_p1, x)


def bernoulli_mean(logit: jax.Array) -> jax.Array:
    """sigmoid(logit), tfp Bernoulli `mean()`."""
    return jax.nn.sigmoid(logit)


# --------------------------------------------------------------------------- Normal


def normal_params(
    out: jax.Array, std_raw: jax.Array, minstd: float, maxstd: float
) -> tuple[jax.Array, jax.Array]:
    """Bounded normal actor head (nets.py:491-498): mean = tanh(out),
    std = (maxstd - minstd) * sigmoid(std_raw + 2) + minstd."""
    std = (maxstd - minstd) * jax.nn.sigmoid(std_raw + 2.0) + minstd
    return jnp.tanh(out), std


def normal_log_prob(mean: jax.Array, std: jax.Array, x: jax.Array) -> jax.Array:
    """Independent Normal log density summed over the last axis: `[..., A]` -> `[...]`."""
    log_unnormalized = -0.5 * jnp.square(x / std - mean / std)
    log_normalization = _HALF_LOG_2PI + jnp.log(std)
    return jnp.sum(log_unnormalized - log_normalization, -1)


def normal_entropy(std: jax.Array) -> jax.Array:
    """Independent Normal entropy summed over the last axis: `[..., A]` -> `[...]`."""
    return jnp.sum(0.5 + (_HALF_LOG_2PI + jnp.log(std)), -1)


def normal_sample(key: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
    """Reparameterised draw `[..., A]` (tfp: normal * scale + loc)."""
    shape = jnp.broadcast_shapes(mean.shape, std.shape)
    return jax.random.normal(key, shape, mean.dtype) * std + mean


def normal_minmax_entropy(dims: int, minstd: float, maxstd: float) -> tuple[float, float]:
    """Entropy bounds of a `dims`-dimensional bounded normal (nets.py:496-497)."""

    def ent(std):
        return float(np.float32(0.5) + (_HALF_LOG_2PI + np.log(np.float32(std))))

    return dims * ent(minstd), dims * ent(maxstd)


# --------------------------------------------------------------------------- init, norm


def init_fan_in(shape: tuple[int, ...]) -> int:
    """Fan-in of a weight shape as the reference's Initializer._fans (nets.py:874-885).

    0-D and 1-D -> 1; 2-D (in, out) -> in; N-D -> prod(shape[:-2]) * shape[-2]. A
    BlockLinear kernel (groups, in/g, out/g) therefore has fan-in groups * in/g = in.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2:
        return 1
    return int(np.prod(shape[:-2], dtype=np.int64)) * shape[-2]


def truncated_normal_init(
    key: jax.Array, shape: tuple[int, ...], fan_in: int | None = None, outscale: float = 1.0
) -> jax.Array:
    """Reference 'normal' weight init (nets.py:846-849, 871): truncated N(0,1) on [-2, 2]
    times 1.1368 * sqrt(1 / fan_in), then times outscale (0 gives zeros).

    `fan_in` defaults to `init_fan_in(shape)`; pass it for layers that override it.
    """
    shape = tuple(int(s) for s in shape)
    fan = init_fan_in(shape) if fan_in is None else int(fan_in)
    value = jax.random.truncated_normal(key, -2, 2, shape, f32)
    # The reference multiplies by a float64 numpy scalar, i.e. by its float32 rounding.
    value = value * np.float32(1.1368 * np.sqrt(1.0 / fan))
    return value * outscale


def rms_norm(x: jax.Array, scale: jax.Array, eps: float = 1e-4,
             in_f32: bool = False) -> jax.Array:
    """x * (rsqrt(mean(x^2, -1) + eps) * scale) (nets.py:758-763 @29eb964, Norm 'rms'), in
    x's dtype: bfloat16 stays bfloat16 there (only float16 is computed in float32).
    in_f32: HEAD's Norm instead computes in float32 and casts the result back to x's
    dtype (embodied/jax/nets.py:374-399 @e3f0224); the same under float32."""
    if in_f32 and x.dtype != f32:
        return rms_norm(x.astype(f32), scale, eps).astype(x.dtype)
    mult = jax.lax.rsqrt(jnp.mean(x * x, -1)[..., None] + eps) * scale.astype(x.dtype)
    return x * mult


# --------------------------------------------------------------------------- compute dtype

# jax.compute_dtype -> JAX dtype (the names are config.COMPUTE_DTYPES; a test keeps them
# equal). float16 is refused by the config check (no loss scaling here).
COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def compute_dtype(name: str):
    """The activations' dtype of a `jax.compute_dtype` value."""
    return COMPUTE_DTYPES[name]


def cast(tree, dtype):
    """Every floating leaf of tree in dtype (the reference's cast_to_compute,
    jaxutils.py:24-27, with the target given). A leaf already in dtype is returned as it
    is, so that a float32 program traces exactly as without the cast."""
    def one(x):
        if not jnp.issubdtype(x.dtype, jnp.floating) or x.dtype == dtype:
            return x
        return x.astype(dtype)
    return jax.tree.map(one, tree)


# --------------------------------------------------------------------------- metrics


# The statistics tensorstats reports, in its order.
TENSORSTATS = ("mean", "std", "mag", "min", "max")


def tensorstats(x: jax.Array, prefix: str | None = None) -> dict[str, jax.Array]:
    """mean/std/mag/min/max of a float tensor (jaxutils.py:52-66, without 'dist')."""
    x = jnp.asarray(x).astype(f32)
    stats = dict(zip(TENSORSTATS, (x.mean(), x.std(), jnp.abs(x).mean(), x.min(), x.max()),
                     strict=True))
    return {f"{prefix}/{k}": v for k, v in stats.items()} if prefix else stats


def tensorstats_names(prefix: str) -> tuple[str, ...]:
    """The names tensorstats(x, prefix) reports."""
    return tuple(f"{prefix}/{k}" for k in TENSORSTATS)


__all__ = [
    "symlog", "symexp", "twohot_bins", "twohot_log_prob", "twohot_mean",
    "twohot_mean_pairsum", "TWOHOT_MEANS", "twohot_mode",
    "unimix_logits", "onehot_sample", "onehot_mode", "onehot_log_prob", "onehot_entropy",
    "categorical_kl", "bernoulli_log_prob", "bernoulli_mean", "normal_params",
    "normal_log_prob", "normal_entropy", "normal_sample", "normal_minmax_entropy",
    "categorical_log_prob", "categorical_entropy", "binary_log_prob", "binary_prob1",
    "normal_log_prob_scipy", "normal_entropy_e3f0224",
    "init_fan_in", "truncated_normal_init", "rms_norm", "tensorstats", "TENSORSTATS",
    "tensorstats_names", "COMPUTE_DTYPES",
    "compute_dtype", "cast",
]
