"""Pictures of a run from its records: learning curves and metric groups.

    curves.png        evaluation return and training-episode return against env rows
    metrics_*.png     one figure per metric group (losses, actor entropy, return normaliser)

Each panel shows a thin line per seed, the mean over seeds (thick) and the min-max range
over seeds (shaded); the top axis gives the updates done at those rows.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

METRIC_GROUPS: dict[str, tuple[str, ...]] = {
    "losses": ("dyn_loss", "rep_loss", "reward_loss", "cont_loss", "vector_loss",
               "image_loss", "actor_loss", "critic_loss", "replay_critic_loss"),
    # 29eb964's tensorstats means, then e3f0224's scalars (a run has one pair).
    "entropy": ("ent/action/mean", "rand/action/mean", "ent/action", "rand/action"),
    "retnorm": ("retnorm/lo", "retnorm/hi", "retnorm/scale"),
}
"""Figure name -> record keys (train window means; retnorm/* from the record's retnorm)."""


def _value(record: Mapping, key: str) -> float:
    if key.startswith("retnorm/"):
        v = (record.get("retnorm") or {}).get(key.split("/", 1)[1])
    elif key in record and not isinstance(record[key], dict):
        v = record[key]
    else:
        v = (record.get("train") or {}).get(key)
    return np.nan if v is None else float(v)


def _grid(records: list[Mapping], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows [N], values [seeds, N]) of one key; NaN where a seed has no value."""
    by_seed: dict[int, dict[int, float]] = defaultdict(dict)
    for r in records:
        by_seed[int(r["seed"])][int(r["rows"])] = _value(r, key)
    rows = sorted({n for d in by_seed.values() for n in d})
    grid = np.array([[d.get(n, np.nan) for n in rows] for _, d in sorted(by_seed.items())],
                    np.float64).reshape(len(by_seed), len(rows))
    return np.asarray(rows), grid


def _panel(ax, records: list[Mapping], key: str, label: str, color: str = "tab:blue",
           name: str | None = None):
    """One key against rows: each seed thin, the mean thick, the range shaded; `name`
    prefixes the legend entry (when several runs share a panel)."""
    x, grid = _grid(records, key)
    if name is not None and (not x.size or not np.isfinite(grid).any()):
        return  # a further run without this key: nothing of it to draw
    if not x.size or not np.isfinite(grid).any():
        ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(label)
        return
    for line in grid:
        ax.plot(x, line, color=color, linewidth=0.6, alpha=0.5)
    with np.errstate(all="ignore"):
        finite = np.isfinite(grid)
        count = finite.sum(0)
        mean = np.where(count > 0, np.where(finite, grid, 0).sum(0) / np.maximum(count, 1),
                        np.nan)
        lo = np.where(count > 0, np.where(finite, grid, np.inf).min(0), np.nan)
        hi = np.where(count > 0, np.where(finite, grid, -np.inf).max(0), np.nan)
    n = grid.shape[0]
    ax.plot(x, mean, color=color, linewidth=2.0, marker="o", markersize=3,
            label=(f"{name}: " if name else "") + f"mean over {n} seed{'s' if n != 1 else ''}"
            + (", range shaded" if n > 1 else ""))
    if n > 1:
        ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
    ax.set_title(label)
    ax.set_xlabel("env steps (rows per seed)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")


def _updates_axis(ax, records: list[Mapping]) -> None:
    """A top axis labelled with the updates done at the log points' rows."""
    pairs = sorted({(int(r["rows"]), int(r["updates"])) for r in records
                    if int(r["seed"]) == int(records[0]["seed"])})
    if len(pairs) < 2 or pairs[0][1] == pairs[-1][1]:
        return  # no updates yet: nothing to label
    rows, updates = map(np.asarray, zip(*pairs, strict=True))
    top = ax.secondary_xaxis("top", functions=(
        lambda x: _extrap(x, rows, updates), lambda u: _extrap(u, updates, rows)))
    top.set_xlabel("updates")


def _extrap(x, xp, fp):
    """np.interp continued linearly past both ends (clamping would put ticks beyond the
    data, e.g. 10,000 updates, on the axis's edge on top of the last one's)."""
    x = np.asarray(x, dtype=float)

    def slope(i, j):  # 0 where two log points share an x (updates 0, 0 early on): clamp
        dx = float(xp[j] - xp[i])
        return 0.0 if dx == 0 else float(fp[j] - fp[i]) / dx

    lo = fp[0] + (x - xp[0]) * slope(0, 1)
    hi = fp[-1] + (x - xp[-1]) * slope(-2, -1)
    return np.where(x < xp[0], lo, np.where(x > xp[-1], hi, np.interp(x, xp, fp)))


def _layout(fig, rows: int, cols: int) -> None:
    """Fixed margins in inches around a rows x cols grid of panels: room for the y tick
    labels on the left, the x label below, and above each panel its title, the updates
    axis and (first row) the figure's title. (matplotlib's constrained layout measures
    every text instead: about half of the pictures' drawing time.)"""
    w, h = fig.get_size_inches()
    left, right, bottom, top, gap_w, gap_h = 0.8, 0.25, 0.55, 1.1, 0.8, 1.35
    panel_w = (w - left - right - (cols - 1) * gap_w) / cols
    panel_h = (h - bottom - top - (rows - 1) * gap_h) / rows
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h,
                        top=1 - top / h, wspace=gap_w / panel_w, hspace=gap_h / panel_h)


def _title(records: list[Mapping], env: str | None) -> str:
    n = len({int(r["seed"]) for r in records})
    return f"{env or 'dreamerjax'}, {n} seed{'s' if n != 1 else ''}"


OTHER_COLORS = ("tab:green", "tab:red", "tab:purple")


def pyplot():
    """matplotlib's pyplot on its Agg backend (the pictures are files; no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(records: Iterable[Mapping], path: str | os.PathLike,
                env: str | None = None, name: str | None = None,
                others: Iterable[tuple[str, Iterable[Mapping]]] = (),
                statistic: tuple[tuple[int, ...], float, float | None] | None = None) -> Path:
    """curves.png: evaluation return (left) and training-episode return (right).

    `others`: further runs (name, records) drawn beside in their own colours, e.g. the
    reference's records (`dreamerjax summary --against`); `name` labels this run then.
    `statistic`: (log points, value, threshold or None) of `dreamerjax summary`, drawn on
    the evaluation panel."""
    plt = pyplot()

    records, others = list(records), [(n, list(r)) for n, r in others]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    _layout(fig, 1, 2)
    try:
        _panel(left, records, "eval_mean", "evaluation return (mean of episodes)",
               name=name if others else None)
        _panel(right, records, "train_return", "training episode return",
               color="tab:orange", name=name if others else None)
        for (other, recs), color in zip(others, OTHER_COLORS, strict=False):
            for ax, key in ((left, "eval_mean"), (right, "train_return")):
                _panel(ax, recs, key, ax.get_title(), color=color, name=other)
        if statistic is not None:
            _statistic(left, *statistic)
        for ax in (left, right):
            if records and ax.lines:  # a panel without data has no rows to label
                _updates_axis(ax, records)
        fig.suptitle(_title(records, env))
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path


def _statistic(ax, rows: tuple[int, ...], value: float, threshold: float | None) -> None:
    """The summary statistic as a dashed segment over its log points, the threshold as a
    line."""
    for n in rows:
        ax.axvline(n, color="gray", linewidth=0.5, linestyle=":")
    ax.plot([rows[0], rows[-1]], [value, value], color="black", linewidth=2, linestyle="--",
            label=f"statistic {value:,.1f}")
    if threshold is not None:
        ax.axhline(threshold, color="tab:red", linewidth=1, linestyle="--",
                   label=f"expected >= {threshold:,.1f}")
    ax.legend(loc="best", fontsize="small")


def plot_metrics(records: Iterable[Mapping], directory: str | os.PathLike,
                 env: str | None = None) -> list[Path]:
    """metrics_<group>.png for each group of METRIC_GROUPS with data."""
    plt = pyplot()

    records = list(records)
    written = []
    for group, keys in METRIC_GROUPS.items():
        keys = [k for k in keys if any(np.isfinite(_value(r, k)) for r in records)]
        if not keys:
            continue
        cols = min(3, len(keys))
        rows = -(-len(keys) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
        _layout(fig, rows, cols)
        try:
            for ax, key in zip(axes.flat, keys, strict=False):
                _panel(ax, records, key, key)
            for ax in list(axes.flat)[len(keys):]:
                ax.set_visible(False)
            fig.suptitle(f"{_title(records, env)}: {group}")
            path = Path(directory) / f"metrics_{group}.png"
            fig.savefig(path, dpi=100)
            written.append(path)
        finally:
            plt.close(fig)
    return written
