"""The training metrics of dreamerjax and of the unmodified reference side by side over a
run, to find the record point where two learning curves part.

    python benchmarks/metrics_side_by_side.py \
        --reference results/cartpole_protocol_e3f0224/reference_s0 \
                    results/cartpole_protocol_e3f0224/reference_s1 \
        --ours results/cartpole_protocol_e3f0224/seed0 results/cartpole_protocol_e3f0224/seed1 \
               results/cartpole_protocol_e3f0224/seed2 --out OUT

Each --reference is a run directory of benchmarks/reference_run (or a folder holding its
records.jsonl[.gz]); each --ours a dreamerjax run directory or results folder. A records
file may hold several seeds (a multi-seed run): they are split by their seed field. Every
seed is one curve.

Record points are aligned by rows (env steps): by default each of the reference's record
points takes each seed's nearest record point within half the reference's smallest
spacing; with --bin N both sides' record points go to bins of N rows (a bin is named by
its last row) and a seed's values within one bin are averaged.

A metric is compared when both sides record it, matched by the reference's name (both
programs write e3f0224's names; the optimizer's differ: metrics_e3f0224.E3F0224_OPT_NAMES),
plus the evaluation and training returns (eval_mean, train_return) and the return
normaliser's state (retnorm/lo, hi, scale). Per record point: the reference's seeds' mean,
min and max (its band), ours' mean and per seed, whether ours' mean lies inside the band,
whether ours' seeds' range overlaps it, ours' mean over the reference's. The first parting
row is the first record point from which ours' mean stays outside the band to the end;
the first apart row, from which the two ranges of seeds stay disjoint.

Writes OUT/metrics.json (everything), OUT/metrics.md (one line per metric) and
OUT/metrics.png (a small plot per metric: ours' seeds and mean over the reference's band),
and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from dreamerjax.algo.metrics_e3f0224 import E3F0224_OPT_NAMES
from dreamerjax.run.records import read_jsonl, read_records, to_jsonable
from dreamerjax.tools.protocol.statistics import MAPPED_NAMES, train_metrics

# Top-level record fields compared beside the window means of `train`.
RETURN_FIELDS = ("eval_mean", "train_return")
# The order of the table for e3f0224's names: world model, its KL and entropies, actor,
# returns and advantages, values, optimizer, evaluation; then 29eb964's in the protocol's
# order (a reference run of that version writes those); any other name follows, sorted.
ORDER = ("loss/dyn", "loss/rep", "loss/rew", "loss/con", "loss/vector", "loss/image",
         "dyn_ent", "rep_ent", "ent/action", "rand/action", "loss/policy", "ret", "ret_min",
         "ret_max", "ret_rate", "retnorm/lo", "retnorm/hi", "retnorm/scale", "adv",
         "adv_std", "adv_mag", "rew", "con", "weight", "val", "slowval", "tar", "loss/value",
         "loss/repval", "opt/loss", "opt/grad_norm", "opt/grad_rms", "opt/update_rms",
         "opt/param_rms", "eval_mean", "train_return")

Series = dict[str, dict[int, dict[str, float]]]  # seed label -> rows -> metric -> value


# ---------------------------------------------------------------------------------------
# Reading


def read_path(path: str) -> list[dict]:
    """The records of a run directory or results folder (records.jsonl or its .gz), or of
    a records file named directly."""
    p = Path(path)
    recs = read_records(p) if p.is_dir() else read_jsonl(p)
    if not recs:
        raise SystemExit(f"{path}: no records")
    return recs


def record_values(record: dict) -> dict[str, float]:
    """One record's values by the reference's names (NaN where null)."""
    out = train_metrics(record)
    for k in RETURN_FIELDS:
        v = record.get(k)
        out[k] = math.nan if v is None else float(v)
    return out


def split_seeds(paths: list[str]) -> dict[str, list[dict]]:
    """Records per seed; a seed is labelled s<seed>, or <folder>/s<seed> where two paths
    hold the same seed number."""
    loaded = [(p, read_path(p)) for p in paths]
    seeds = [r.get("seed", 0) for _, recs in loaded for r in recs]
    per_path = [sorted({r.get("seed", 0) for r in recs}) for _, recs in loaded]
    clash = sum(len(s) for s in per_path) != len(set(seeds))
    out: dict[str, list[dict]] = {}
    for (path, recs), path_seeds in zip(loaded, per_path, strict=True):
        name = os.path.basename(os.path.normpath(path))
        for s in path_seeds:
            label = f"{name}/s{s}" if clash else f"s{s}"
            out[label] = [r for r in recs if r.get("seed", 0) == s]
    return out


# ---------------------------------------------------------------------------------------
# Aligning record points


def by_bin(bin_rows: int):
    """A seed's records grouped by bins of `bin_rows` rows, each named by its last row."""
    def group(recs: list[dict]) -> dict[int, list[dict]]:
        out: dict[int, list[dict]] = {}
        for r in recs:
            out.setdefault(-(-int(r["rows"]) // bin_rows) * bin_rows, []).append(r)
        return out

    return group


def by_nearest(ref_rows: list[int]):
    """A seed's record nearest to each of the reference's record points, where one lies
    within half their smallest spacing (so no record serves two points but at a tie)."""
    grid = sorted(set(ref_rows))
    reach = min((b - a for a, b in zip(grid, grid[1:], strict=False)), default=0) / 2

    def group(recs: list[dict]) -> dict[int, list[dict]]:
        out = {}
        for g in grid:
            best = min(recs, key=lambda r: abs(int(r["rows"]) - g), default=None)
            if best is not None and abs(int(best["rows"]) - g) <= reach:
                out[g] = [best]
        return out

    return group


def align(per_seed: dict[str, list[dict]], group) -> Series:
    """Each seed's values at the aligned rows; values of records sharing one averaged."""
    out: Series = {}
    for label, recs in per_seed.items():
        out[label] = {}
        for n, members in sorted(group(recs).items()):
            values = [record_values(r) for r in members]
            names = {k for v in values for k in v}
            out[label][n] = {k: _nanmean([v.get(k, math.nan) for v in values]) for k in names}
    return out


def _nanmean(values: list[float]) -> float:
    good = [v for v in values if math.isfinite(v)]
    return sum(good) / len(good) if good else math.nan


# ---------------------------------------------------------------------------------------
# Comparing


def names_of(series: Series) -> set[str]:
    return {k for rows in series.values() for m in rows.values() for k in m}


def matched_names(ref: Series, ours: Series) -> dict[str, str]:
    """{reference name: our name} for every metric both sides record, in ORDER."""
    ref_names, our_names = names_of(ref), names_of(ours)
    pairs = {}
    for name in ref_names:
        key = name if name in our_names else E3F0224_OPT_NAMES.get(name)
        if key in our_names:
            pairs[name] = key
    order = (*ORDER, *MAPPED_NAMES)
    rank = {n: i for i, n in reversed(list(enumerate(order)))}
    return {n: pairs[n] for n in sorted(pairs, key=lambda n: (rank.get(n, len(order)), n))}


def seed_values(series: Series, rows: int, key: str) -> dict[str, float]:
    """The seeds' finite values of `key` at `rows`."""
    out = {}
    for label, by_rows in series.items():
        v = by_rows.get(rows, {}).get(key, math.nan)
        if math.isfinite(v):
            out[label] = v
    return out


def point(rows: int, ref: dict[str, float], ours: dict[str, float], full: bool) -> dict:
    """One record point of one metric: the reference's band and ours against it. full:
    every seed of both sides has the metric there."""
    lo, hi = min(ref.values()), max(ref.values())
    ref_mean = sum(ref.values()) / len(ref)
    our_mean = sum(ours.values()) / len(ours)
    our_lo, our_hi = min(ours.values()), max(ours.values())
    return {"rows": rows,
            "reference": {"mean": ref_mean, "min": lo, "max": hi, "seeds": ref},
            "ours": {"mean": our_mean, "min": our_lo, "max": our_hi, "seeds": ours},
            "inside": lo <= our_mean <= hi,
            "overlap": our_lo <= hi and lo <= our_hi,
            "ratio": our_mean / ref_mean if ref_mean != 0 else None, "full": full}


def first_parting(points: list[dict], field: str) -> int | None:
    """The first full record point from which `field` stays False to the last full one;
    None when the last has it True (or there is none). A point that lacks a seed is left
    out: a partial reference run's band shrinks to its one seed there."""
    start = None
    for p in (p for p in points if p["full"]):
        start = None if p[field] else (p["rows"] if start is None else start)
    return start


def compare_metric(ref: Series, ours: Series, name: str, key: str) -> dict:
    rows = sorted({n for s in (*ref.values(), *ours.values()) for n in s})
    points = []
    for n in rows:
        r, o = seed_values(ref, n, name), seed_values(ours, n, key)
        if r and o:
            points.append(point(n, r, o, len(r) == len(ref) and len(o) == len(ours)))
    full = [p for p in points if p["full"]]
    end = full[-1] if full else None
    return {"ours_name": key, "points": points,
            "first_parting": first_parting(points, "inside"),
            "first_apart": first_parting(points, "overlap"),
            "apart_at": [p["rows"] for p in full if not p["overlap"]],
            "end_rows": end and end["rows"], "end_ratio": end and end["ratio"]}


def compare(ref_paths: list[str], our_paths: list[str], bin_rows: int | None = None) -> dict:
    """Everything metrics.json holds."""
    ref_seeds, our_seeds = split_seeds(ref_paths), split_seeds(our_paths)
    group = by_bin(bin_rows) if bin_rows else by_nearest(
        [int(r["rows"]) for recs in ref_seeds.values() for r in recs])
    ref, ours = align(ref_seeds, group), align(our_seeds, group)
    matched = matched_names(ref, ours)
    metrics = {name: compare_metric(ref, ours, name, key) for name, key in matched.items()}
    used = set(matched.values())
    return {"reference_paths": ref_paths, "our_paths": our_paths, "bin": bin_rows,
            "reference_seeds": sorted(ref), "our_seeds": sorted(ours),
            "metrics": {k: v for k, v in metrics.items() if v["points"]},
            "only_reference": sorted(names_of(ref) - set(matched)),
            "only_ours": sorted(names_of(ours) - used - set(matched))}


# ---------------------------------------------------------------------------------------
# Writing


def _fmt(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _row(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def markdown(result: dict) -> str:
    lines = [f"Reference seeds {', '.join(result['reference_seeds'])}; ours "
             f"{', '.join(result['our_seeds'])}. Band: the reference's seeds' [min, max]. "
             "Parts from: the first record point from which ours' mean stays outside the "
             "band; apart from: from which ours' seeds' range stays disjoint from it. "
             "Both count only the record points where every seed of both sides has the "
             "metric; the end is the last of them. Ratio: ours' mean over the reference's "
             "there.",
             "Apart at: every such record point where the ranges are disjoint.",
             "", "| metric | parts from | apart from | apart at | ratio at end | band at end "
             "| ours at end |", "|---|---|---|---|---|---|---|"]
    for name, m in result["metrics"].items():
        end = next(p for p in reversed(m["points"]) if p["rows"] == m["end_rows"]) \
            if m["end_rows"] is not None else m["points"][-1]
        band = f"{_fmt(end['reference']['min'])} to {_fmt(end['reference']['max'])}"
        apart = ", ".join(_row(n) for n in m["apart_at"]) or "-"
        lines.append(f"| {name} | {_row(m['first_parting'])} | {_row(m['first_apart'])} | "
                     f"{apart} | "
                     f"{_fmt(m['end_ratio'])} | {band} | {_fmt(end['ours']['mean'])} "
                     f"({_row(end['rows'])}) |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["metrics"])
    cols = min(6, max(1, len(names)))
    grid_rows = -(-len(names) // cols)
    fig, axes = plt.subplots(grid_rows, cols, figsize=(2.3 * cols, 1.7 * grid_rows),
                             dpi=80, squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names, strict=False):
        m = result["metrics"][name]
        x = [p["rows"] for p in m["points"]]
        ax.fill_between(x, [p["reference"]["min"] for p in m["points"]],
                        [p["reference"]["max"] for p in m["points"]], color="0.8", lw=0)
        ax.plot(x, [p["reference"]["mean"] for p in m["points"]], color="0.4", lw=1, ls="--")
        for label in result["our_seeds"]:
            pts = [(p["rows"], p["ours"]["seeds"][label]) for p in m["points"]
                   if label in p["ours"]["seeds"]]
            if pts:
                ax.plot(*zip(*pts, strict=True), color="C0", lw=0.6, alpha=0.5)
        ax.plot(x, [p["ours"]["mean"] for p in m["points"]], color="C0", lw=1.5)
        if m["first_parting"] is not None:
            ax.axvline(m["first_parting"], color="C3", lw=0.8)
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=6)
    fig.suptitle("ours (blue: seeds, mean) over the reference's band (grey; dashed: mean); "
                 "red: parts from", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write(result: dict, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(
        json.dumps(to_jsonable(result), indent=1, allow_nan=False) + "\n")
    md = markdown(result)
    (out / "metrics.md").write_text(md + "\n")
    plot(result, out / "metrics.png")
    return md


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", nargs="+", required=True, metavar="REF_RUN")
    ap.add_argument("--ours", nargs="+", required=True, metavar="RUN")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--bin", type=int, default=None, metavar="ROWS",
                    help="bin both sides' record points by this many rows")
    args = ap.parse_args(argv)
    if args.bin is not None and args.bin <= 0:
        ap.error("--bin must be positive")
    result = compare(args.reference, args.ours, args.bin)
    if not result["metrics"]:
        sys.exit("no metric recorded by both sides at a common record point")
    print(write(result, args.out))


if __name__ == "__main__":
    main()
