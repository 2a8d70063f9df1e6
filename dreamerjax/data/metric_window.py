"""Window means of training metrics between log points, as the reference aggregates them.

The reference's Agg mean (embodied/core/agg.py:72-116 @29eb964) skips NaN values (they
neither add nor count) and keeps +-inf: a window holding +inf has mean +inf, one holding
both +inf and -inf has mean NaN. The reference sums in float64 on the host; on device we
keep, per metric, the first finite value `ref` and a compensated (Kahan) float32 sum of the
finite values' offsets from it, their count and the counts of +inf and -inf. The offsets
keep the last digits of large, slowly varying metrics such as opt_param_count, which a
plain float32 sum or running mean loses. `add` runs on device inside the compiled
chunk; `result` on the host.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import jax.numpy as jnp
import numpy as np

FIELDS = ("ref", "sum", "comp", "count", "posinf", "neginf")


def init(names: Iterable[str]) -> dict:
    """An empty window: {field: {name: f32 []}}."""
    names = tuple(names)
    return {f: {k: jnp.zeros((), jnp.float32) for k in names} for f in FIELDS}


def reset(window: dict) -> dict:
    return {f: {k: jnp.zeros_like(v) for k, v in d.items()} for f, d in window.items()}


def add(window: dict, metrics: Mapping) -> dict:
    """Add one update's metrics (scalars) to the window; names not in the window are
    ignored."""
    out = {f: {} for f in FIELDS}
    for k, count in window["count"].items():
        v = jnp.asarray(metrics[k], jnp.float32)
        finite = jnp.isfinite(v)
        ref = jnp.where(finite & (count == 0), v, window["ref"][k])
        x = jnp.where(finite, v - ref, 0.0)
        y = x - window["comp"][k]
        total = window["sum"][k] + y
        out["comp"][k] = (total - window["sum"][k]) - y
        out["sum"][k] = total
        out["ref"][k] = ref
        out["count"][k] = count + finite.astype(jnp.float32)
        out["posinf"][k] = window["posinf"][k] + (v == jnp.inf).astype(jnp.float32)
        out["neginf"][k] = window["neginf"][k] + (v == -jnp.inf).astype(jnp.float32)
    return out


def result(window: Mapping, index: int | None = None) -> dict[str, float | None]:
    """Host window (numpy, optionally with a leading seed axis: pick `index`) -> the
    reference's mean per name; None where the window saw no non-NaN value."""
    def pick(x):
        x = np.asarray(x)
        return float(x if index is None else x[index])

    out = {}
    for k in window["count"]:
        pos, neg = pick(window["posinf"][k]), pick(window["neginf"][k])
        if pos and neg:
            out[k] = math.nan
        elif pos or neg:
            out[k] = math.inf if pos else -math.inf
        elif pick(window["count"][k]) > 0:
            out[k] = pick(window["ref"][k]) + pick(window["sum"][k]) / pick(window["count"][k])
        else:
            out[k] = None
    return out
