"""Print the README's side-by-side table from one JSON written by run.py.

    python benchmarks/side_by_side/table.py [results/bench/side_by_side_YYYYMMDD.json]

Without an argument, the newest results/bench/side_by_side_*.json. Every ratio is taken
within that one file (one machine, one run): figures of other machines or days are never
divided by each other. Standard library only.
"""

from __future__ import annotations

import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LABELS = {
    "reference": "reference 29eb964 (`JAXAgent._train`, fixed batch)",
    "ajax": "Ajax (`train_DreamerV3.update`: sample + update + write-back)",
    "dreamerjax": "dreamerjax (bench program: sample + update + write-back)",
    "dreamerjax_3seeds": "dreamerjax, 3 seeds {how} (per seed)",
}


def _label(name: str, info: dict) -> str:
    # runs before run.seed_loop existed (2026-12-01, 12fb410) vmapped their seeds
    how = "mapped" if info.get("seed_loop") == "map" else "vmapped"
    return LABELS.get(name, name).format(how=how)


def _gib(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB"


def markdown(r: dict) -> str:
    """The table (program rows) and its caption lines, from one run.py result."""
    m, cfg = r["machine"], r["config"]
    progs = r["programs"]
    peak = r.get("matmul_peak", {})
    peaks = [peak[k]["matmul_peak_flops_per_s"] / 1e9 for k in ("before", "after")
             if k in peak]
    versions = {k: v["info"].get("jax") for k, v in progs.items()}
    lines = [
        f"Side by side on {m['cpu']} ({m['cores']} cores; {', '.join(m['simd'])}), "
        f"{r['date']}, {cfg['rounds']} rounds of {cfg['updates']} timed updates after "
        f"{cfg['warmup']} per program, alternated ({' '.join(cfg['order'])} per round); "
        f"batch {cfg['batch_size']} x {cfg['batch_rows']} rows, {cfg['dtype']}.",
        "Float32 matmul peak (as `dreamerjax bench`): "
        + (", ".join(f"{p:.0f}" for p in peaks) + " GFLOP/s (before, after)" if peaks
           else "not measured")
        + f"; load average (1, 5, 15 min) before {r['loadavg_before']}, after "
        f"{r.get('loadavg_after')}.",
        "",
        "| program | jax | s / update, median per round | all rounds: median (p10, p90) "
        "| / dreamerjax | cold compile | peak RSS |",
        "|---|---|---|---|---|---|---|",
    ]
    ours = progs.get("dreamerjax", {}).get("all_rounds", {}).get("median")
    for name in cfg["order"]:
        p = progs[name]
        a = p["all_rounds"]
        rounds = ", ".join(f"{x:.3f}" for x in p["seconds_per_update_per_seed_rounds"])
        ratio = f"{a['median'] / ours:.2f}x" if ours else ""
        lines.append(
            f"| {_label(name, p['info'])} | {versions[name]} | {rounds} | {a['median']:.3f} "
            f"({a['p10']:.3f}, {a['p90']:.3f}) | {ratio} | {p['compile_cold_s']:.1f} s "
            f"| {_gib(p['peak_rss_mib'])} |")
    ref = progs.get("reference", {}).get("all_rounds", {}).get("median")
    aj = progs.get("ajax", {}).get("all_rounds", {}).get("median")
    if ours and (ref or aj):
        parts = []
        if ref:
            parts.append(f"{ref / ours:.2f}x the reference")
        if aj:
            parts.append(f"{aj / ours:.2f}x Ajax")
        lines += ["", "dreamerjax per update, one seed: " + " and ".join(parts) +
                  " (ratios of medians over all rounds of this run; the column / dreamerjax "
                  "divides each program's median by dreamerjax's, 1 seed)."]
    if not all(rd.get("finite", True) is not False for p in progs.values()
               for rd in p["rounds"]):
        lines.append("WARNING: a program reported non-finite losses.")
    return "\n".join(lines) + "\n"


def newest() -> str:
    """The side-by-side JSON whose run started last (its own `date`, not its file name)."""
    paths = glob.glob(os.path.join(REPO, "results", "bench", "side_by_side_*.json"))
    if not paths:
        raise SystemExit("no results/bench/side_by_side_*.json; run run.py first")

    def started(path: str) -> str:
        with open(path) as f:
            return json.load(f).get("date", "")

    return max(paths, key=started)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1:
        raise SystemExit("usage: table.py [SIDE_BY_SIDE_JSON]")
    path = argv[0] if argv else newest()
    with open(path) as f:
        print(markdown(json.load(f)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
