"""Learning curves from records.jsonl rows: evaluation return and S2 against rows."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

# One colour per side (ours first), so a comparison plot reads the same way every time.
_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


def _series(records: Iterable[Mapping], key: str) -> dict[str, dict[int, dict[int, float]]]:
    """side -> seed -> rows -> value (None read as NaN)."""
    out: dict[str, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        value = r.get(key)
        out[str(r.get("side", ""))][int(r["seed"])][int(r["rows"])] = (
            np.nan if value is None else float(value))
    return out


def _panel(ax, series: Mapping[str, Mapping[int, Mapping[int, float]]], ylabel: str) -> None:
    for i, (side, seeds) in enumerate(sorted(series.items())):
        color = _COLORS[i % len(_COLORS)]
        rows = sorted({n for per_seed in seeds.values() for n in per_seed})
        if not rows:
            continue
        # [seeds, rows]; a seed without a value at some N contributes NaN there.
        grid = np.array([[per_seed.get(n, np.nan) for n in rows]
                         for _, per_seed in sorted(seeds.items())], np.float64)
        x = np.asarray(rows)
        for line in grid:
            ax.plot(x, line, color=color, linewidth=0.6, alpha=0.5)
        with np.errstate(all="ignore"):
            finite = np.isfinite(grid)
            count = finite.sum(0)
            mean = np.where(count > 0, np.where(finite, grid, 0).sum(0) / np.maximum(count, 1),
                            np.nan)
            lo = np.where(count > 0, np.where(finite, grid, np.inf).min(0), np.nan)
            hi = np.where(count > 0, np.where(finite, grid, -np.inf).max(0), np.nan)
        label = f"{side or 'run'}: mean of {grid.shape[0]} seeds"
        ax.plot(x, mean, color=color, linewidth=2.0, label=label, marker="o", markersize=3)
        ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel("rows (env steps over all envs of a seed)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")


def plot_curves(records: Iterable[Mapping], path: str | os.PathLike,
                env: str | None = None) -> Path:
    """Save a two-panel PNG: eval_mean (left) and s2_logged (right) against rows.

    records: records.jsonl rows (any number of sides and seeds). Per side: a thin line per
    seed, the mean over seeds (thick) and the min-max range over seeds (shaded).
    env: shown in the title. Returns the path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = list(records)
    seeds = sorted({int(r["seed"]) for r in records})
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    try:
        _panel(left, _series(records, "eval_mean"), "evaluation return (mean of episodes)")
        left.set_title("evaluation")
        _panel(right, _series(records, "s2_logged"), "S2: training return (last 10 / env)")
        right.set_title("training episodes (S2)")
        fig.suptitle(f"{env or 'dreamerjax'}, seeds {', '.join(map(str, seeds)) or 'none'}")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path
