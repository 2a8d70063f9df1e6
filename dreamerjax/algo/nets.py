"""Networks of DreamerV3 as pure functions over nested parameter dicts.

Parameter paths equal the reference's (nets.py @29eb964) without the `agent/` prefix, e.g.
`params['dyn']['dynin0']['kernel']`, so the name map to the reference is a split on '/'.
Every hidden layer is Linear -> RMSNorm -> SiLU (nets.py:599-640, :729-763); output layers
have no norm. Initialisers follow the reference's 'normal' (truncated normal, nets.py:846-849).

Compute dtype (`jax.compute_dtype`): layers compute in their input's dtype, their float32
kernels and biases cast to it (nets.py:582,593,628,635,690,701). The callers cast inputs
to the compute dtype where the reference does (the encoder after symlog, the RSSM's carry,
action and embedding, the decoder's and heads' inputs), and outputs to float32 where it
does: head outputs (nets.py:442,448), decoder outputs (:367, :442), the RSSM's logits for
its distributions (:220). With float32 every cast is the identity (numerics.cast).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.algo import numerics as nm
from dreamerjax.config.defaults import AgentConfig, Reference, RSSMConfig

sg = jax.lax.stop_gradient
f32 = jnp.float32


# ----------------------------------------------------------------------------- layers


def init_linear(key, din: int, dout: int, outscale: float = 1.0, norm: bool = False) -> dict:
    """Dense layer params: kernel [din, dout], bias [dout], optional norm scale [dout]."""
    p = {
        "kernel": nm.truncated_normal_init(key, (din, dout), din, outscale),
        "bias": jnp.zeros((dout,), jnp.float32),
    }
    if norm:
        p["norm"] = {"scale": jnp.ones((dout,), jnp.float32)}
    return p


def linear(p: dict, x: jnp.ndarray, norm32: bool = False) -> jnp.ndarray:
    """x [..., din] -> [..., dout] in x's dtype; norm + SiLU when the layer has a norm
    (hidden layer). norm32: the norm computes in float32 (HEAD, numerics.rms_norm)."""
    x = x @ nm.cast(p["kernel"], x.dtype) + nm.cast(p["bias"], x.dtype)
    if "norm" in p:
        x = jax.nn.silu(nm.rms_norm(x, p["norm"]["scale"], in_f32=norm32))
    return x


def init_block_linear(key, din: int, dout: int, groups: int, outscale=1.0, norm=False) -> dict:
    """Block-diagonal layer: kernel [groups, din/groups, dout/groups] (nets.py:643-706)."""
    assert din % groups == 0 and dout % groups == 0, (din, dout, groups)
    shape = (groups, din // groups, dout // groups)
    # Initializer._fans for a 3-D kernel without block_fans: fan_in = groups * din/groups.
    p = {
        "kernel": nm.truncated_normal_init(key, shape, din, outscale),
        "bias": jnp.zeros((dout,), jnp.float32),
    }
    if norm:
        p["norm"] = {"scale": jnp.ones((dout,), jnp.float32)}
    return p


# Below this many rows a block-diagonal product runs faster as one batched einsum (the
# observe scan's 16 rows: per-op overhead dominates); from it on, as one plain matmul per
# group (imagination's 1,024 rows: the einsum's output comes out group-major with the
# rows minor, and every consumer pays a transposing copy that costs more than the
# matmuls). Both compute the same products. Measured on 2 CPU cores, results/bench/LOG.md.
PER_GROUP_MIN_ROWS = 128


def _per_group(x: jnp.ndarray) -> bool:
    return math.prod(x.shape[:-1]) >= PER_GROUP_MIN_ROWS


def grouped_matmul(x: jnp.ndarray, kernel: jnp.ndarray) -> jnp.ndarray:
    """x [..., G * I] @ block-diagonal kernel [G, I, O] -> [..., G * O]."""
    g, i, o = kernel.shape
    if _per_group(x):
        return jnp.concatenate([x[..., j * i:(j + 1) * i] @ kernel[j] for j in range(g)], -1)
    y = jnp.einsum("...gi,gio->...go", x.reshape((*x.shape[:-1], g, i)), kernel)
    return y.reshape((*x.shape[:-1], g * o))


def block_linear(p: dict, x: jnp.ndarray, norm32: bool = False) -> jnp.ndarray:
    """x [..., G * I] -> [..., G * O] in x's dtype; each group multiplies its own block."""
    x = grouped_matmul(x, nm.cast(p["kernel"], x.dtype)) + nm.cast(p["bias"], x.dtype)
    if "norm" in p:
        x = jax.nn.silu(nm.rms_norm(x, p["norm"]["scale"], in_f32=norm32))
    return x


def init_mlp(key, din: int, units: int, layers: int, prefix: str) -> dict:
    keys = jax.random.split(key, layers)
    out, d = {}, din
    for i in range(layers):
        out[f"{prefix}{i}"] = init_linear(keys[i], d, units, norm=True)
        d = units
    return out


def mlp(p: dict, x: jnp.ndarray, layers: int, prefix: str, norm32: bool = False):
    for i in range(layers):
        x = linear(p[f"{prefix}{i}"], x, norm32)
    return x


def feat(lat: dict) -> jnp.ndarray:
    """Head input: concat(deter [..., D], stoch [..., S, C] flattened) (nets.py:791-818)."""
    stoch = lat["stoch"]
    return jnp.concatenate([lat["deter"], stoch.reshape((*stoch.shape[:-2], -1))], -1)


# ----------------------------------------------------------------------------- RSSM


def init_rssm(key, cfg: RSSMConfig, embed_dim: int, act_dim: int) -> dict:
    """Block-GRU RSSM params (nets.py:16-220, cell 'blockgru')."""
    d, h, g = cfg.deter, cfg.hidden, cfg.blocks
    sc = cfg.stoch * cfg.classes
    ks = iter(jax.random.split(key, 16))
    p = {
        "dynin0": init_linear(next(ks), d, h, norm=True),
        "dynin1": init_linear(next(ks), sc, h, norm=True),
        "dynin2": init_linear(next(ks), act_dim, h, norm=True),
    }
    din = d + g * 3 * h  # each group sees its deter block plus the three shared inputs
    for i in range(cfg.dynlayers):
        p[f"dyn{i}"] = init_block_linear(next(ks), din, d, g, norm=True)
        din = d
    p["dyncore"] = init_block_linear(next(ks), d, 3 * d, g)
    xin = embed_dim if cfg.absolute else d + embed_dim
    for i in range(cfg.obslayers):
        p[f"obs{i}"] = init_linear(next(ks), xin, h, norm=True)
        xin = h
    p["obslogit"] = init_linear(next(ks), h, sc, outscale=cfg.outscale)
    xin = d
    for i in range(cfg.imglayers):
        p[f"img{i}"] = init_linear(next(ks), xin, h, norm=True)
        xin = h
    p["imglogit"] = init_linear(next(ks), h, sc, outscale=cfg.outscale)
    return p


def prior_keys(cfg: RSSMConfig) -> tuple[str, ...]:
    """The RSSM's parameter groups that only the prior reads (prior_logit): img0 ...,
    imglogit."""
    return (*(f"img{i}" for i in range(cfg.imglayers)), "imglogit")


def posterior_params(p: dict, cfg: RSSMConfig) -> dict:
    """The RSSM parameters a posterior step (obs_step) reads: all but prior_keys. p may be
    any tree shaped as the RSSM's parameters (their slices' split axes, say)."""
    prior = prior_keys(cfg)
    return {k: v for k, v in p.items() if k not in prior}


def rssm_initial(cfg: RSSMConfig, batch: int) -> dict:
    return {
        "deter": jnp.zeros((batch, cfg.deter), jnp.float32),
        "stoch": jnp.zeros((batch, cfg.stoch, cfg.classes), jnp.float32),
    }


def gru_step(p: dict, cfg: RSSMConfig, deter, stoch, action,
             version: Reference = Reference.V29EB964):
    """One block-GRU step: deter [B, D], stoch [B, S, C], action [B, A] -> deter [B, D],
    all in one (the compute) dtype. At e3f0224 the norms compute in float32 (rssm.py:
    135-159 @e3f0224, the same cell otherwise)."""
    g = cfg.blocks
    dt = deter.dtype
    norm32 = version == Reference.E3F0224
    stoch = stoch.reshape((stoch.shape[0], -1))
    action = action / sg(jnp.maximum(1.0, jnp.abs(action)))
    x0 = linear(p["dynin0"], deter, norm32)
    x1 = linear(p["dynin1"], stoch, norm32)
    x2 = linear(p["dynin2"], action, norm32)
    x = jnp.concatenate([x0, x1, x2], -1)
    p0 = p["dyn0"]
    k = nm.cast(p0["kernel"], dt)  # [g, D/g + 3H, O/g]
    x = _dyn0_product(deter, x, k) + nm.cast(p0["bias"], dt)
    x = jax.nn.silu(nm.rms_norm(x, p0["norm"]["scale"], in_f32=norm32))
    for i in range(1, cfg.dynlayers):
        x = block_linear(p[f"dyn{i}"], x, norm32)
    kc, bc = nm.cast((p["dyncore"]["kernel"], p["dyncore"]["bias"]), dt)
    i, o = kc.shape[1], kc.shape[2] // 3
    if not _per_group(x):
        y = grouped_matmul(x, kc) + bc
        y = y.reshape((*y.shape[:-1], g, 3 * o))
        parts = [y[..., q * o:(q + 1) * o].reshape((*y.shape[:-2], -1)) for q in range(3)]
        return _gru_gates(*parts, deter)
    # Large batches: dyncore and the gates group by group. Group j's output holds its
    # [reset, cand, update] blocks, which gate deter block j; each group's fusion reads
    # contiguous memory (1.3x faster over the imagination scan than gating the
    # concatenated output).
    new = []
    for j in range(g):
        y = x[:, j * i:(j + 1) * i] @ kc[j] + bc[j * 3 * o:(j + 1) * 3 * o]
        new.append(_gru_gates(y[:, :o], y[:, o:2 * o], y[:, 2 * o:],
                              deter[:, j * o:(j + 1) * o]))
    return jnp.concatenate(new, -1)


def _dyn0_product(deter, x, k):
    """The first block layer's product: group j multiplies [deter block j, x] by k[j]
    (nets.py:158-163). deter [B, D], x [B, 3H], k [g, D/g + 3H, O/g] -> [B, g * O/g].

    In float32, x (shared by all groups) is one dense matmul instead of g copies of x
    (same products, 1.7x faster on CPU than broadcasting x to every group). Below float32
    the reference's own form: its one product per group is rounded once, where the sum
    of two rounded partial products would round twice. From PER_GROUP_MIN_ROWS rows each
    group's [deter block j, x] is multiplied as it is: flattening all groups' inputs into
    one [B, g * (D/g + 3H)] array for grouped_matmul to slice again is a copy on a TPU,
    whose tiles it does not keep (0.71 ms of the 12m update's 12.3 ms in the imagination
    scan; docs/performance.md, "On a TPU"), and gives the same products."""
    g, dg = k.shape[0], deter.shape[-1] // k.shape[0]
    if deter.dtype != f32:
        b = deter.shape[0]
        # x broadcast to every group, as there: its gradient is then their sum, reduced
        # once (adding the groups' gradients one by one would round at every add).
        xs = jnp.broadcast_to(x[:, None], (b, g, x.shape[-1]))
        if _per_group(deter):
            return jnp.concatenate(
                [jnp.concatenate([deter[:, j * dg:(j + 1) * dg], xs[:, j]], -1) @ k[j]
                 for j in range(g)], -1)
        grouped = jnp.concatenate([deter.reshape((b, g, dg)), xs], -1)
        return grouped_matmul(grouped.reshape((b, -1)), k)
    hd = grouped_matmul(deter, k[:, :dg])
    wx = jnp.transpose(k[:, dg:], (1, 0, 2)).reshape((x.shape[-1], -1))
    return hd + x @ wx


def _gru_gates(reset, cand, update, deter):
    """The block-GRU gates, reference nets.py:167-172: all inputs [B, N] -> [B, N]."""
    reset = jax.nn.sigmoid(reset)
    cand = jnp.tanh(reset * cand)
    update = jax.nn.sigmoid(update - 1)
    return update * cand + (1 - update) * deter


def _logit(p: dict, cfg: RSSMConfig, x, version: Reference = Reference.V29EB964):
    """The latent's logits [..., S, C]. 29eb964 mixes in the uniform here, in the compute
    dtype, and keeps the mixed logits (nets.py:212-216 @29eb964); HEAD keeps the raw
    linear output and mixes in float32 where it builds the distribution
    (rssm.py:168-176, outs.py:210-217 @e3f0224): `latent_dist_logits`."""
    x = linear(p, x)
    x = x.reshape((*x.shape[:-1], cfg.stoch, cfg.classes))
    return x if version == Reference.E3F0224 else nm.unimix_logits(x, cfg.unimix)


def latent_dist_logits(cfg: RSSMConfig, logit, version: Reference = Reference.V29EB964):
    """The float32 logits of a latent's distribution from what `_logit` keeps."""
    if version == Reference.E3F0224:
        return nm.unimix_logits(nm.cast(logit, f32), cfg.unimix)
    return nm.cast(logit, f32)


def prior_logit(p: dict, cfg: RSSMConfig, deter, version: Reference = Reference.V29EB964):
    """deter [..., D] -> prior logits [..., S, C] (nets.py:112-117 @29eb964,
    rssm.py:161-166 @e3f0224)."""
    x = deter
    for i in range(cfg.imglayers):
        x = linear(p[f"img{i}"], x, version == Reference.E3F0224)
    return _logit(p["imglogit"], cfg, x, version)


def _sample(key, cfg: RSSMConfig, logit, mode: bool, version: Reference = Reference.V29EB964):
    """A straight-through one-hot of the float32 logits (nets.py:220), in the logits'
    dtype (nets.py:70)."""
    lf = latent_dist_logits(cfg, logit, version)
    return nm.cast(nm.onehot_mode(lf) if mode else nm.onehot_sample(key, lf), logit.dtype)


def obs_step(p, cfg: RSSMConfig, carry: dict, action, embed, is_first, key, mode=False,
             version: Reference = Reference.V29EB964):
    """Posterior step. carry {deter [B,D], stoch [B,S,C]}, action [B,A], embed [B,E],
    is_first [B] -> (carry, outs {deter, stoch, logit}). The carry and the previous action
    are zeroed where is_first (nets.py:63-64). Computes in embed's dtype, the compute dtype:
    the carry and action are cast to it (nets.py:58)."""
    carry, action = nm.cast((carry, action), embed.dtype)
    keep = 1.0 - is_first.astype(embed.dtype)
    deter = carry["deter"] * keep[:, None]
    stoch = carry["stoch"] * keep[:, None, None]
    action = action * keep[:, None]
    deter = gru_step(p, cfg, deter, stoch, action, version)
    x = embed if cfg.absolute else jnp.concatenate([deter, embed], -1)
    for i in range(cfg.obslayers):
        x = linear(p[f"obs{i}"], x, version == Reference.E3F0224)
    logit = _logit(p["obslogit"], cfg, x, version)
    stoch = _sample(key, cfg, logit, mode, version)
    return {"deter": deter, "stoch": stoch}, {"deter": deter, "stoch": stoch, "logit": logit}


def img_step(p, cfg: RSSMConfig, carry: dict, action, key, mode=False,
             version: Reference = Reference.V29EB964):
    """Prior step: carry {deter, stoch}, action [B, A] -> (carry, outs), in the carry's
    dtype (the action is cast to it, nets.py:82)."""
    action = nm.cast(action, carry["deter"].dtype)
    deter = gru_step(p, cfg, carry["deter"], carry["stoch"], action, version)
    logit = prior_logit(p, cfg, deter, version)
    stoch = _sample(key, cfg, logit, mode, version)
    return {"deter": deter, "stoch": stoch}, {"deter": deter, "stoch": stoch, "logit": logit}


def observe(p, cfg: RSSMConfig, carry, actions, embed, is_first, key, mode=False,
            version: Reference = Reference.V29EB964):
    """Scan obs_step over time. actions [B,T,A], embed [B,T,E], is_first [B,T] ->
    (carry, outs with [B, T, ...]), in embed's dtype."""
    carry = nm.cast(carry, embed.dtype)
    T = embed.shape[1]
    keys = jax.random.split(key, T)
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731

    def step(c, inp):
        a, e, f, k = inp
        return obs_step(p, cfg, c, a, e, f, k, mode, version)

    carry, outs = jax.lax.scan(step, carry, (swap(actions), swap(embed), swap(is_first), keys))
    return carry, jax.tree.map(swap, outs)


def rssm_kl_losses(p, cfg: RSSMConfig, outs: dict, free: float,
                   version: Reference = Reference.V29EB964):
    """Dynamics and representation losses [B, T] with free bits (nets.py:97-110 @29eb964,
    rssm.py:120-133 @e3f0224), float32: the distributions take float32 logits
    (nets.py:220). Metrics: 29eb964's prior_ent / post_ent statistics, or HEAD's means
    dyn_ent / rep_ent with its entropy formula."""
    prior = latent_dist_logits(cfg, prior_logit(p, cfg, outs["deter"], version), version)
    post = latent_dist_logits(cfg, outs["logit"], version)
    dyn = nm.categorical_kl(sg(post), prior).sum(-1)
    rep = nm.categorical_kl(post, sg(prior)).sum(-1)
    if free:
        dyn = jnp.maximum(dyn, free)
        rep = jnp.maximum(rep, free)
    if version == Reference.E3F0224:
        return dyn, rep, {"dyn_ent": nm.categorical_entropy(prior).sum(-1).mean(),
                          "rep_ent": nm.categorical_entropy(post).sum(-1).mean()}
    metrics = {}
    metrics.update(nm.tensorstats(nm.onehot_entropy(prior).sum(-1), "prior_ent"))
    metrics.update(nm.tensorstats(nm.onehot_entropy(post).sum(-1), "post_ent"))
    return dyn, rep, metrics


# ----------------------------------------------------------------------------- encoder


def _conv_init(key, k, cin, cout, outscale=1.0, norm=True):
    shape = (k, k, cin, cout)
    # Initializer._fans for a 4-D kernel: fan_in = k * k * cin.
    p = {
        "kernel": nm.truncated_normal_init(key, shape, k * k * cin, outscale),
        "bias": jnp.zeros((cout,), jnp.float32),
    }
    if norm:
        p["norm"] = {"scale": jnp.ones((cout,), jnp.float32)}
    return p


_DN = ("NHWC", "HWIO", "NHWC")


def same_conv_args(res: tuple[int, int], k: int, stride: int, transp: bool):
    """(window_strides, padding, lhs_dilation) of a 'SAME' convolution of a k x k kernel
    on [.., res, res, ..] frames as jax.lax.conv_general_dilated takes them: the strided
    one's padding from jax.lax.padtype_to_pads; the transposed one is jax.lax.conv_transpose
    (transpose_kernel off), i.e. a unit-stride convolution of the input dilated by the
    stride, padded by k + s - 2 split as conv_transpose splits it (tests check both
    forms equal jax's bitwise)."""
    if not transp:
        pads = jax.lax.padtype_to_pads(res, (k, k), (stride, stride), "SAME")
        return (stride, stride), tuple(tuple(int(v) for v in p) for p in pads), (1, 1)
    total = k + stride - 2
    low = k - 1 if stride > k - 1 else math.ceil(total / 2)
    return (1, 1), ((low, total - low),) * 2, (stride, stride)


def _conv_raw(x, kernel, strides, padding, lhs_dilation):
    return jax.lax.conv_general_dilated(x, kernel, strides, padding, lhs_dilation,
                                        dimension_numbers=_DN)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def conv2d(x, kernel, strides, padding, lhs_dilation):
    """jax.lax.conv_general_dilated in NHWC / HWIO, with both gradients written as NHWC /
    HWIO convolutions themselves.

    Why: jax's transpose rules give the gradients as convolutions with permuted dimension
    labels (the kernel's in/out swapped, the frames as features), which XLA:CPU rewrites
    into its fast (YNNPACK / Eigen) form only outside loops; inside the training chunk's
    scan and update loop they ran in XLA's naive emitter, the kernel gradient 10-30x
    slower (results/bench/LOG.md). The same sums in the layout XLA would have rewritten them
    to: the gradients equal jax's bitwise (tests/test_nets_conv.py)."""
    return _conv_raw(x, kernel, strides, padding, lhs_dilation)


def _conv2d_fwd(x, kernel, strides, padding, lhs_dilation):
    return _conv_raw(x, kernel, strides, padding, lhs_dilation), (x, kernel)


def _conv2d_bwd(strides, padding, lhs_dilation, res, dy):
    x, kernel = res
    kh, kw = kernel.shape[:2]
    # dx: dy (dilated by the strides) convolved with the flipped kernel, its in and out
    # channels swapped, at the padding jax's own transpose rule uses: kernel - 1 - low
    # before, and what gives x's size after.
    pads = []
    for size, k, s, d, (low, _), out in zip(x.shape[1:3], (kh, kw), strides, lhs_dilation,
                                             padding, dy.shape[1:3], strict=True):
        before = k - 1 - low
        pads.append((before, (size - 1) * d + k - 1 - (out - 1) * s - before))
    flipped = kernel[::-1, ::-1].transpose(0, 1, 3, 2)
    dx = jax.lax.conv_general_dilated(dy, flipped, lhs_dilation, pads, strides,
                                      dimension_numbers=_DN)
    # dk[a, b, c, o] = sum over frames n and output pixels (i, j) of
    # x_dilated_padded[n, i * s + a, j * s + b, c] * dy[n, i, j, o]: a convolution of x's
    # channels as the batch, dy as the kernel and the frames as the contracted features.
    dk = jax.lax.conv_general_dilated(
        x.transpose(3, 1, 2, 0), dy.transpose(1, 2, 0, 3), (1, 1), padding,
        lhs_dilation=lhs_dilation, rhs_dilation=strides, dimension_numbers=_DN)
    return dx, dk[:, :kh, :kw, :].transpose(1, 2, 0, 3).astype(kernel.dtype)


conv2d.defvjp(_conv2d_fwd, _conv2d_bwd)


def _conv(p, x, stride, transp=False, pool=False, norm32=False):
    """Conv2D (nets.py:539-596), 'SAME' padding, HWIO kernel, in x's dtype; norm + SiLU
    when it has a norm. Transposed convolutions use the stored kernel as it is
    (transpose_kernel off). pool: a 2 x 2 max-pool between the convolution and the norm
    (HEAD's encoder stage, rssm.py:237-241 @e3f0224)."""
    kernel = nm.cast(p["kernel"], x.dtype)
    strides, padding, dilation = same_conv_args(x.shape[-3:-1], kernel.shape[0], stride,
                                                transp)
    x = conv2d(x, kernel, strides, padding, dilation)
    x = x + nm.cast(p["bias"], x.dtype)
    if pool:
        n, h, w, c = x.shape
        x = x.reshape((n, h // 2, 2, w // 2, 2, c)).max((2, 4))
    if "norm" in p:
        x = jax.nn.silu(nm.rms_norm(x, p["norm"]["scale"], in_f32=norm32))
    return x


def _strides(layers: int, outer: bool) -> list[int]:
    return [1 if (outer and i == 0) else 2 for i in range(layers)]


def _final_res(res: int, strides: list[int]) -> int:
    for s in strides:
        res = math.ceil(res / s)
    return res


def cnn_strides(cfg, res: int) -> list[int]:
    """Strides of the encoder's conv layers (nets.py:267-270): the first layer keeps the
    resolution when `outer`, every other halves it; the output must reach `minres`."""
    strides = _strides(len(cfg.mults), cfg.outer)
    final = _final_res(res, strides)
    if final != cfg.minres:
        raise ValueError(
            f"Image resolution {res} does not reach minres {cfg.minres} with "
            f"{len(cfg.mults)} conv layers (strides {strides}); got {final}. "
            f"Set the image encoder/decoder geometry, e.g. {cnn_suggestions(res, cfg.outer)}.")
    return strides


def cnn_suggestions(res: int, outer: bool = True) -> str:
    """Command-line geometries that fit `res` (2 to 4 conv stages, final resolution >= 2)."""
    out = []
    for n in (2, 3, 4):
        final = _final_res(res, _strides(n, outer))
        if final >= 2:
            mults = " ".join(str(m) for m in (1, 2, 3, 4)[:n])
            out.append(f"--cnn-mults {mults} --cnn-minres {final}")
    return " or ".join(out) or f"--cnn-mults 1 --cnn-minres {res}"


def _cnn_channels(spaces, keys) -> int:
    obs = spaces.obs_dict()
    return sum(obs[k][0][-1] for k in keys)


def init_encoder(key, cfg: AgentConfig, spaces) -> tuple[dict, int]:
    """SimpleEncoder params (nets.py:223-277): `mlp{i}` on the concatenated vector keys,
    `conv{i}` on the channel-concatenated image keys. Returns (params, embed_dim), the
    embedding being [vector MLP units, flattened CNN features]."""
    e = cnn_config(cfg, cfg.enc, spaces, spaces.enc_image_keys)
    obs = spaces.obs_dict()
    kv, kc = jax.random.split(key)
    p, edim = {}, 0
    if spaces.enc_vector_keys:
        din = sum(obs[k][0][0] for k in spaces.enc_vector_keys)
        p.update(init_mlp(kv, din, e.units, e.layers, "mlp"))
        edim += e.units
    if spaces.enc_image_keys:
        cnn_strides(e, obs[spaces.enc_image_keys[0]][0][0])
        ks = jax.random.split(kc, len(e.mults))
        cin = _cnn_channels(spaces, spaces.enc_image_keys)
        for i, m in enumerate(e.mults):
            p[f"conv{i}"] = _conv_init(ks[i], e.kernel, cin, e.depth * m)
            cin = e.depth * m
        edim += e.minres * e.minres * cin
    return p, edim


def cnn_config(cfg: AgentConfig, part, spaces, image_keys):
    """The encoder's or decoder's config (`part`) with its final resolution: 29eb964's
    `minres` key, or at HEAD the image side over 2 per stage (rssm.py:242-243, 309-312
    @e3f0224, which asserts it in [3, 16])."""
    if cfg.version != Reference.E3F0224 or not image_keys:
        return part
    res = spaces.obs_dict()[image_keys[0]][0][0]
    stages = len(part.mults) - int(part.outer)
    minres = res // 2 ** stages
    if not 3 <= minres <= 16 or minres * 2 ** stages != res:
        raise ValueError(f"{res}-pixel images with {len(part.mults)} CNN stages end at "
                         f"{res / 2 ** stages:g} pixels; HEAD needs a whole side in "
                         f"[3, 16]: set enc.simple.mults / dec.simple.mults, e.g. "
                         f"{e3f0224_cnn_suggestions(res)}")
    return dataclasses.replace(part, minres=minres)


def e3f0224_cnn_suggestions(res: int) -> str:
    """--cnn-mults values that fit `res` at HEAD: n stages, each halving the side, to a
    whole side in [3, 16]; the last n of HEAD's multipliers (2, 3, 4, 4), whose final 4
    keeps the decoder's first layer divisible into its 8 blocks."""
    fits = [n for n in (1, 2, 3, 4) if res % 2 ** n == 0 and 3 <= res // 2 ** n <= 16]
    if not fits:
        return f"(none fits {res} pixels: HEAD's CNN needs a side of 3-16 times a power of 2)"
    return " or ".join("--cnn-mults " + " ".join(map(str, (2, 3, 4, 4)[-n:])) for n in fits)


def check_image_geometry(cfg: AgentConfig, spaces) -> None:
    """The encoder's and decoder's CNN geometry against the image keys, before anything
    is built (ValueError naming the keys to set). The reference only asserts these, the
    last one in its BlockLinear (embodied/jax/nets.py:263 @e3f0224): the decoder's first
    layer, minres x minres x its last depth units, splits into dec.simple.block_space
    blocks."""
    obs = spaces.obs_dict()
    if spaces.enc_image_keys:
        e = cnn_config(cfg, cfg.enc, spaces, spaces.enc_image_keys)
        cnn_strides(e, obs[spaces.enc_image_keys[0]][0][0])
    if not spaces.dec_image_keys:
        return
    d = cnn_config(cfg, cfg.dec, spaces, spaces.dec_image_keys)
    res = obs[spaces.dec_image_keys[0]][0][0]
    if cfg.version != Reference.E3F0224 and decoder_resolution(d) != res:
        raise ValueError(
            f"decoder geometry (mults {d.mults}, minres {d.minres}) makes "
            f"{decoder_resolution(d)}-pixel images, the image keys have {res}; set it "
            f"like the encoder's, e.g. {cnn_suggestions(res, d.outer)}")
    units = d.minres * d.minres * d.depth * d.mults[-1]
    if d.block_space and units % d.block_space:
        raise ValueError(
            f"the image decoder's first layer has {units} units ({d.minres} x {d.minres} "
            f"x depth {d.depth} x its last mult {d.mults[-1]}), which "
            f"dec.simple.block_space={d.block_space} blocks do not divide; change the "
            "last entry of dec.simple.mults or dec.simple.depth")


def encode(p, cfg: AgentConfig, spaces, obs: dict) -> jnp.ndarray:
    """Preprocessed float observations {name: [*B, *shape]} -> embed [*B, E] in the
    compute dtype.

    Vector keys are concatenated, symlogged in float32 and go through the MLP; image keys
    are concatenated along channels in the compute dtype, shifted by -0.5 and go through
    the CNN; the two outputs are concatenated vectors first (nets.py:246-277)."""
    if cfg.version == Reference.E3F0224:
        return _encode_e3f0224(p, cfg, spaces, obs)
    e = cfg.enc
    dt = nm.compute_dtype(cfg.compute_dtype)
    outs = []
    if spaces.enc_vector_keys:
        x = jnp.concatenate([obs[k].astype(jnp.float32) for k in spaces.enc_vector_keys], -1)
        x = nm.symlog(x) if e.symlog else x
        outs.append(mlp(p, nm.cast(x, dt), e.layers, "mlp"))
    if spaces.enc_image_keys:
        x = jnp.concatenate([nm.cast(obs[k], dt) for k in spaces.enc_image_keys], -1)
        bshape = x.shape[:-3]
        x = x.reshape((-1, *x.shape[-3:])) - 0.5
        for i, s in enumerate(cnn_strides(e, x.shape[-3])):
            x = _conv(p[f"conv{i}"], x, s)
        outs.append(x.reshape((*bshape, -1)))
    return jnp.concatenate(outs, -1) if len(outs) > 1 else outs[0]


def _encode_e3f0224(p, cfg: AgentConfig, spaces, obs: dict) -> jnp.ndarray:
    """HEAD's encoder (rssm.py:210-250 @e3f0224): the vector keys in sorted order
    (nets.py:471 DictConcat), each symlogged in float32 and cast, through the MLP; the image
    keys sorted, shifted by -0.5, through stages of a stride-1 convolution, a 2 x 2
    max-pool, the norm and SiLU; every norm in float32. [*B, E] in the compute dtype."""
    e = cfg.enc
    dt = nm.compute_dtype(cfg.compute_dtype)
    outs = []
    vkeys = sorted(spaces.enc_vector_keys)
    if vkeys:
        squish = nm.symlog if e.symlog else (lambda v: v)
        x = jnp.concatenate([nm.cast(squish(obs[k].astype(f32)), dt) for k in vkeys], -1)
        outs.append(mlp(p, x, e.layers, "mlp", norm32=True))
    ikeys = sorted(spaces.enc_image_keys)
    if ikeys:
        x = jnp.concatenate([nm.cast(obs[k], dt) for k in ikeys], -1)
        bshape = x.shape[:-3]
        x = x.reshape((-1, *x.shape[-3:])) - 0.5
        for i in range(len(e.mults)):
            x = _conv(p[f"conv{i}"], x, 1, pool=True, norm32=True)
        outs.append(x.reshape((*bshape, -1)))
    return jnp.concatenate(outs, -1) if len(outs) > 1 else outs[0]


# ----------------------------------------------------------------------------- decoder


def out_name(key: str) -> str:
    """The decoder's output layer of a vector key (nets.py:329-331)."""
    return "out_" + key.replace("/", "_")


def decoder_resolution(cfg, outer: bool | None = None) -> int:
    """Image side the decoder produces: minres doubled by every transposed stage, and by
    the output layer unless `outer` (nets.py:357-365)."""
    outer = cfg.outer if outer is None else outer
    return cfg.minres * 2 ** (len(cfg.mults) - 1) * (1 if outer else 2)


def init_decoder(key, cfg: AgentConfig, spaces) -> dict:
    """SimpleDecoder params (nets.py:280-369): an MLP trunk `mlp{i}` with one output
    `out_<key>` per vector key, and for the image keys the block-linear `space0` on deter,
    `space1hid` / `space1` on stoch, `spacenorm`, transposed `conv{i}` and `imgout` with
    the image keys' channels."""
    d = cnn_config(cfg, cfg.dec, spaces, spaces.dec_image_keys)
    r = cfg.rssm
    obs = spaces.obs_dict()
    fdim = r.deter + r.stoch * r.classes
    kv, ki = jax.random.split(key)
    p = {}
    if spaces.dec_vector_keys:
        ks = jax.random.split(kv, 1 + len(spaces.dec_vector_keys))
        p.update(init_mlp(ks[0], fdim, d.units, d.layers, "mlp"))
        for k, name in zip(ks[1:], spaces.dec_vector_keys, strict=True):
            p[out_name(name)] = {"out": init_linear(k, d.units, obs[name][0][0],
                                                    d.vec_outscale)}
    if spaces.dec_image_keys:
        check_image_geometry(cfg, spaces)
        k1, k2, k3, k4, k5 = jax.random.split(ki, 5)
        depths = [d.depth * m for m in d.mults]
        space = d.minres * d.minres * depths[-1]
        sdim = r.stoch * r.classes
        p["space0"] = init_block_linear(k1, r.deter, space, d.block_space)
        if d.hidden_stoch:
            p["space1hid"] = init_linear(k2, sdim, 2 * d.units, norm=True)
        p["space1"] = init_linear(k3, 2 * d.units if d.hidden_stoch else sdim, space)
        p["spacenorm"] = {"scale": jnp.ones((depths[-1],), jnp.float32)}
        ks = jax.random.split(k4, len(depths))
        cin = depths[-1]
        for i in reversed(range(len(depths) - 1)):
            p[f"conv{i}"] = _conv_init(ks[i], d.kernel, cin, depths[i])
            cin = depths[i]
        p["imgout"] = _conv_init(k5, d.kernel, cin, _cnn_channels(spaces, spaces.dec_image_keys),
                                 outscale=d.outscale, norm=False)
    return p


def decode(p, cfg: AgentConfig, spaces, lat: dict) -> dict:
    """Decoder predictions {key: [..., *shape]}, float32: vectors in symlog space (the mode
    is symexp of it), images in pixel space in [0, 1] (sigmoid); vectors first. The latent
    is cast to the compute dtype first (nets.py:316,329,339-340)."""
    d = cfg.dec
    version = cfg.version
    lat = nm.cast({k: lat[k] for k in ("deter", "stoch")}, nm.compute_dtype(cfg.compute_dtype))
    outs = {}
    if spaces.dec_vector_keys:
        x = mlp(p, _decoder_input(lat, version), d.layers, "mlp",
                norm32=version == Reference.E3F0224)
        for name in spaces.dec_vector_keys:
            outs[name] = nm.cast(linear(p[out_name(name)]["out"], x), f32)
    if spaces.dec_image_keys:
        dcfg = dataclasses.replace(cfg, dec=cnn_config(cfg, d, spaces, spaces.dec_image_keys))
        image = _decode_image_e3f0224 if version == Reference.E3F0224 else _decode_image
        x = nm.cast(image(p, dcfg, lat), f32)
        sizes = [spaces.obs_dict()[k][0][-1] for k in spaces.dec_image_keys]
        for name, part in zip(spaces.dec_image_keys, jnp.split(x, np.cumsum(sizes)[:-1], -1),
                              strict=True):
            outs[name] = part
    return outs


def _decoder_input(lat: dict, version: Reference) -> jnp.ndarray:
    """The vector decoder's input: [deter, stoch] at 29eb964 (nets.py:316), [stoch, deter]
    at e3f0224 (rssm.py:293)."""
    if version != Reference.E3F0224:
        return feat(lat)
    stoch = lat["stoch"]
    return jnp.concatenate([stoch.reshape((*stoch.shape[:-2], -1)), lat["deter"]], -1)


def _block_space(p, cfg: AgentConfig, deter: jnp.ndarray, depth: int) -> jnp.ndarray:
    """The image decoder's start from deter [..., deter] -> [N, minres, minres, depth]: a
    block-linear whose block g fills channel slice g of every position ('(g h w c) -> h w
    (g c)'), as both versions do."""
    g, mr = cfg.dec.block_space, cfg.dec.minres
    x0 = block_linear(p["space0"], deter.reshape((-1, cfg.rssm.deter)))
    x0 = x0.reshape((-1, g, mr, mr, depth // g)).transpose((0, 2, 3, 1, 4))
    return x0.reshape((-1, mr, mr, depth))


def _decode_image_e3f0224(p, cfg: AgentConfig, lat: dict) -> jnp.ndarray:
    """HEAD's image decoder (rssm.py:308-350 @e3f0224, bspace > 0, strided off): the same
    block-linear / hidden-stoch start as 29eb964, then per stage a 2x nearest-neighbour
    repeat and a stride-1 convolution (norm, SiLU), the last one `imgout`; sigmoid. Norms
    in float32. [..., H, W, sum C]."""
    d, r = cfg.dec, cfg.rssm
    deter, stoch = lat["deter"], lat["stoch"]
    bshape = deter.shape[:-1]
    depths = [d.depth * m for m in d.mults]
    mr = d.minres
    x0 = _block_space(p, cfg, deter, depths[-1])
    x1 = linear(p["space1hid"], stoch.reshape((-1, r.stoch * r.classes)), norm32=True)
    x1 = linear(p["space1"], x1).reshape((-1, mr, mr, depths[-1]))
    x = jax.nn.silu(nm.rms_norm(x0 + x1, p["spacenorm"]["scale"], in_f32=True))
    up = lambda v: v.repeat(2, -2).repeat(2, -3)  # noqa: E731
    for i in reversed(range(len(depths) - 1)):
        x = _conv(p[f"conv{i}"], up(x), 1, norm32=True)
    x = jax.nn.sigmoid(_conv(p["imgout"], up(x), 1))
    return x.reshape((*bshape, *x.shape[1:]))


def _decode_image(p, cfg: AgentConfig, lat: dict) -> jnp.ndarray:
    """Latent -> sigmoid images [..., H, W, sum C] (nets.py:333-365, block_space > 0)."""
    d, r = cfg.dec, cfg.rssm
    deter, stoch = lat["deter"], lat["stoch"]
    bshape = deter.shape[:-1]
    depths = [d.depth * m for m in d.mults]
    mr = d.minres
    x0 = _block_space(p, cfg, deter, depths[-1])
    x1 = stoch.reshape((-1, r.stoch * r.classes))
    if d.hidden_stoch:
        x1 = linear(p["space1hid"], x1)
    x1 = linear(p["space1"], x1).reshape((-1, mr, mr, depths[-1]))
    x = jax.nn.silu(nm.rms_norm(x0 + x1, p["spacenorm"]["scale"]))
    for i in reversed(range(len(depths) - 1)):
        x = _conv(p[f"conv{i}"], x, 2, transp=True)
    x = _conv(p["imgout"], x, 1 if d.outer else 2, transp=True)
    x = jax.nn.sigmoid(x)
    return x.reshape((*bshape, *x.shape[1:]))


# ----------------------------------------------------------------------------- heads


def init_head(key, din: int, units: int, layers: int, dout: int, outscale: float) -> dict:
    """MLP head 'h{i}' layers plus an output 'dist/out' (nets.py:372-408)."""
    k1, k2 = jax.random.split(key)
    p = init_mlp(k1, din, units, layers, "h")
    p["dist"] = {"out": init_linear(k2, units, dout, outscale)}
    return p


def head(p: dict, x: jnp.ndarray, layers: int, dtype, name: str = "dist", out: str = "out",
         norm32: bool = False):
    """x [..., F] -> raw outputs [..., dout], float32 (nets.py:442); the layers compute in
    `dtype` (MLP's Input casts to the compute dtype, nets.py:393)."""
    x = mlp(p, nm.cast(x, dtype), layers, "h", norm32)
    return nm.cast(linear(p[name][out], x), f32)


def twohot_width(bins: int, version: Reference = Reference.V29EB964) -> int:
    """Two-hot heads pad an odd bin count by one output and drop it (nets.py:437-443
    @29eb964); e3f0224's have exactly `bins` outputs (heads.py:132-144 @e3f0224)."""
    if version == Reference.E3F0224:
        return bins
    return bins + bins % 2


def twohot_logits(p: dict, x: jnp.ndarray, layers: int, bins: int, dtype,
                  norm32: bool = False) -> jnp.ndarray:
    out = head(p, x, layers, dtype, norm32=norm32)
    return out[..., :bins]


def param_count(tree) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(tree)))
