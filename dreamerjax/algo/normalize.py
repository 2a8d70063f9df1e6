"""The reference's moments normalisers (`Moments`, jaxutils.py:301-398 @29eb964;
`Normalize`, embodied/jax/utils.py:16-93 @e3f0224).

retnorm, always on: exponential moving averages of the 5th and 95th percentile of the
lambda returns. The actor divides advantages by `scale = max(limit, high - low)`; with
limit 1 small returns are not scaled up. valnorm and advnorm (below) are off by default.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from dreamerjax.config.defaults import NORM_IMPLS, NormConfig, Reference, RetNormConfig

f32 = jnp.float32


@flax.struct.dataclass
class RetNormState:
    """EMA of the low / high return percentiles, float32 scalars (both start at 0)."""

    low: jax.Array
    high: jax.Array


def retnorm_init() -> RetNormState:
    """Zero state, as `nj.Variable(jnp.zeros, (), f32)` in the reference."""
    return RetNormState(low=jnp.zeros((), f32), high=jnp.zeros((), f32))


def retnorm_update(state: RetNormState, x: jax.Array, cfg: RetNormConfig,
                   data_axis: str | None = None) -> RetNormState:
    """Move the EMAs towards this batch's percentiles (jaxutils.py:356-359).

    x: returns of any shape (`[N, H]`); no gradient flows into the state.
    Percentiles are jnp.percentile's default (linear interpolation) over all elements.
    data_axis: the mapped axis the batch is split over (data-parallel updates): the
    percentiles are those of every shard's returns gathered, as the reference's
    all_gather over its train devices (jaxutils.py:338 @29eb964), so every shard moves
    the same state by the whole batch.
    """
    x = jax.lax.stop_gradient(x.astype(f32))
    if data_axis is not None:
        x = jax.lax.all_gather(x, data_axis)
    low = jnp.percentile(x, cfg.perclo)
    high = jnp.percentile(x, cfg.perchi)
    rate = cfg.rate
    return RetNormState(
        low=(1 - rate) * state.low + rate * low,
        high=(1 - rate) * state.high + rate * high,
    )


def retnorm_stats(state: RetNormState, cfg: RetNormConfig) -> tuple[jax.Array, jax.Array]:
    """(offset, scale) = (low, max(limit, high - low)), gradient-free (jaxutils.py:382-386)."""
    offset = state.low
    scale = jnp.maximum(cfg.limit, state.high - state.low)
    return jax.lax.stop_gradient(offset), jax.lax.stop_gradient(scale)


# ----------------------------------------------------------------------------- valnorm, advnorm
#
# The reference's other moments normalisers, off by default: valnorm (the critic's
# targets, and the values it bootstraps from) and advnorm (the advantages). Their state is
# a dict of float32 scalars, empty when off, so a run with both off carries no extra state
# and compiles the program it did without them. 29eb964's `Moments` (jaxutils.py:301-398)
# and e3f0224's `Normalize` (embodied/jax/utils.py:16-93, debias on for these two) differ
# in their impl names, their bias correction (29eb964 divides by the corrector, e3f0224
# multiplies by its inverse) and their impls (min_max and perc_corr are 29eb964's only).

_29 = NORM_IMPLS[Reference.V29EB964]
_HEAD = NORM_IMPLS[Reference.E3F0224]
# impl -> the state's entries.
_NORM_STATE = {"off": (), "none": (), "mean_std": ("mean", "sqrs", "corr"),
               "meanstd": ("mean", "sqrs", "corr"), "min_max": ("low", "high"),
               "perc": ("low", "high"), "perc_corr": ("low", "high", "corr")}
# Moments' and Normalize's percentiles, which neither version's config sets.
PERCLO, PERCHI = 5.0, 95.0


def norm_is_off(cfg: NormConfig) -> bool:
    return cfg.impl in (_29[0], _HEAD[0])


def _entries(cfg: NormConfig, version: Reference) -> tuple[str, ...]:
    if cfg.impl not in _NORM_STATE or (not norm_is_off(cfg) and cfg.impl not in
                                       NORM_IMPLS[version]):
        raise ValueError(f"impl {cfg.impl!r}; choose one of {', '.join(NORM_IMPLS[version])}")
    entries = _NORM_STATE[cfg.impl]
    # e3f0224's perc keeps a debias corrector (utils.py:28-29 @e3f0224; debias defaults on).
    if version == Reference.E3F0224 and cfg.impl == "perc":
        entries = (*entries, "corr")
    return entries


def norm_init(cfg: NormConfig, version: Reference) -> dict:
    """Zero state (nj.Variable(jnp.zeros, (), f32)): {} when off."""
    return {k: jnp.zeros((), f32) for k in _entries(cfg, version)}


def norm_update(state: dict, x: jax.Array, cfg: NormConfig, version: Reference,
                data_axis: str | None = None) -> dict:
    """Move the moments towards x (any shape), gradient-free: 29eb964's Moments.update
    (jaxutils.py:330-367), e3f0224's Normalize.update (utils.py:47-60, 76-93 @e3f0224).
    data_axis: the mapped axis the batch is split over; means are averaged over it,
    minima / maxima taken over it, percentiles of the gathered batch, as both versions."""
    if not state:
        return state
    x = jax.lax.stop_gradient(x.astype(f32))
    if data_axis is None:
        mean, min_, max_, per = jnp.mean, jnp.min, jnp.max, jnp.percentile
    else:
        mean = lambda v: jax.lax.pmean(v.mean(), data_axis)  # noqa: E731
        min_ = lambda v: jax.lax.pmin(v.min(), data_axis)  # noqa: E731
        max_ = lambda v: jax.lax.pmax(v.max(), data_axis)  # noqa: E731
        per = lambda v, q: jnp.percentile(jax.lax.all_gather(v, data_axis), q)  # noqa: E731
    m = cfg.rate
    ema = lambda old, new: (1 - m) * old + m * new  # noqa: E731
    new = dict(state)
    if cfg.impl in ("mean_std", "meanstd"):
        new["mean"] = ema(state["mean"], mean(x))
        new["sqrs"] = ema(state["sqrs"], mean(x * x))
    elif cfg.impl == "min_max":
        low, high = min_(x), max_(x)
        new["low"] = (1 - m) * jnp.minimum(state["low"], low) + m * low
        new["high"] = (1 - m) * jnp.maximum(state["high"], high) + m * high
    else:  # perc, perc_corr
        new["low"] = ema(state["low"], per(x, PERCLO))
        new["high"] = ema(state["high"], per(x, PERCHI))
    if "corr" in state:
        new["corr"] = ema(state["corr"], 1.0)
    return new


def norm_stats(state: dict, cfg: NormConfig, version: Reference
               ) -> tuple[jax.Array | float, jax.Array | float]:
    """(offset, scale), gradient-free: (0, 1) when off (Moments.stats, jaxutils.py:369-398
    @29eb964; Normalize.stats, utils.py:62-74 @e3f0224)."""
    if not state:
        return 0.0, 1.0
    sg = jax.lax.stop_gradient
    head = version == Reference.E3F0224
    if cfg.impl in ("mean_std", "meanstd"):
        if head:
            inv = 1.0 / jnp.maximum(cfg.rate, state["corr"])
            mean = state["mean"] * inv
            std = jnp.sqrt(jax.nn.relu(state["sqrs"] * inv - mean ** 2))
        else:
            corr = jnp.maximum(cfg.rate, state["corr"])
            mean = state["mean"] / corr
            std = jnp.sqrt(jax.nn.relu(state["sqrs"] / corr - mean ** 2))
        return sg(mean), sg(jnp.maximum(cfg.limit, std))
    low, high = state["low"], state["high"]
    if head:  # perc with its debias corrector
        inv = 1.0 / jnp.maximum(cfg.rate, state["corr"])
        low, high = low * inv, high * inv
    elif cfg.impl == "perc_corr":
        corr = jnp.maximum(cfg.rate, state["corr"])
        low, high = low / corr, high / corr
    return sg(low), sg(jnp.maximum(cfg.limit, high - low))
