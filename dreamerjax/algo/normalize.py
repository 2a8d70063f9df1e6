"""Percentile return normaliser (the reference's `Moments(impl='perc')`, jaxutils.py:301-398).

State: exponential moving averages of the 5th and 95th percentile of the lambda returns.
The actor divides advantages by `scale = max(limit, high - low)`; with limit 1 small
returns are not scaled up.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from dreamerjax.config.defaults import RetNormConfig

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
