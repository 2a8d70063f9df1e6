"""A figure of `dreamerjax bench --sweep` lines: milliseconds per update and seed, and the
fraction of the device's peak, per model size, one line per dtype and seed count. Reads
one or more sweep JSONL files (the `ok` lines; `started`, `skipped` and `cut_off` lines are
left out) and writes a PNG (256 colours, small enough to keep in the repository).

    python benchmarks/plot_sweep.py results/bench/tpu_sweep_20261207.jsonl \
        --out docs/images/tpu_sweep.png
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

SIZES = ("1m", "12m", "25m", "50m", "100m", "200m", "400m")


def points(paths: list[str]) -> list[dict]:
    """The finished points of the files, in order."""
    out = []
    for path in paths:
        with open(path) as f:
            out += [r for r in map(json.loads, filter(str.strip, f)) if r.get("status") == "ok"]
    if not out:
        raise SystemExit(f"no finished point (status ok) in {', '.join(paths)}")
    return out


def series(rows: list[dict]) -> dict[tuple[str, int], list[dict]]:
    """(dtype, seeds) -> its points by size."""
    by = collections.defaultdict(list)
    for r in rows:
        by[(r["dtype"], r["seeds"])].append(r)
    return {k: sorted(v, key=lambda r: SIZES.index(r["size"])) for k, v in sorted(by.items())}


def plot(rows: list[dict], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    sizes = [s for s in SIZES if any(r["size"] == s for r in rows)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=100)
    counts = sorted({r["seeds"] for r in rows})
    for (dtype, seeds), pts in series(rows).items():
        x = [sizes.index(r["size"]) for r in pts]
        # a colour per seed count, a line and marker per dtype
        style = dict(color=f"C{counts.index(seeds)}", ms=5,
                     marker="o" if dtype == "bfloat16" else "s",
                     ls="-" if dtype == "bfloat16" else "--", mfc="none" if dtype != "bfloat16"
                     else None, label=f"{dtype}, {seeds} seed{'s' if seeds > 1 else ''}")
        left.plot(x, [1e3 * r["seconds_per_update_per_seed"]["median"] for r in pts], **style)
        right.plot(x, [100 * r["fraction_of_peak"] for r in pts], **style)
    kind = rows[0].get("device_kind", rows[0].get("platform", ""))
    left.set(yscale="log", ylabel="ms per update and seed (median)",
             title=f"{kind}: the update's time")
    peak = rows[0].get("peak_flops_per_s")
    right.set(ylabel="% of the peak", title="achieved FLOP/s" + (
        f", % of {peak / 1e12:.0f} TFLOP/s" if peak else ""))
    for ax in (left, right):
        ax.set_xticks(range(len(sizes)), sizes)
        ax.set_xlabel("model size")
        ax.grid(alpha=0.3)
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out)
    Image.open(out).convert("RGB").quantize(256).save(out, optimize=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="sweep JSONL files (`dreamerjax bench --sweep --out`)")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    plot(points(args.files), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
