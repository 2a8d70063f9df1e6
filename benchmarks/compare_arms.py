"""Side-by-side table of two dreamerjax runs of the CartPole protocol (e.g. two arms that
differ in one component), with the reference's window means known from
the diagnosis "Diagnosis: Ajax DreamerV3 vs reference 29eb964, CartPole 1m comparison"
where they exist.

    python benchmarks/compare_arms.py RUN_A RUN_B --names exact pairsum > table.md

Each RUN is a run directory or a folder holding its records.jsonl. Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import os

METRICS = ("ent/action/mean", "adv/std", "val/std", "ret/std", "rew/min", "critic_loss",
           "actor_loss", "val/mean", "ret/mean")

# Reference window means (seeds 0-2, min-max) quoted by the diagnosis (002, tables of the
# 2,000- and 4,000-row windows and the text on the 6,000-row window); nothing else of the
# reference's per-window record was published with it.
REFERENCE = {
    2000: {"val/std": "0.0846", "ret/std": "0.133-0.138", "adv/std": "0.159-0.162",
           "rew/min": "-0.278"},
    4000: {"ent/action/mean": "0.506-0.518", "adv/std": "0.328-0.339",
           "val/std": "0.052-0.053", "rew/min": "-0.113 to -0.111",
           "critic_loss": "5.05-5.30", "actor_loss": "0.161-0.175"},
    6000: {"val/std": "~0.01"},
}


def load(path: str) -> list[dict]:
    if os.path.isdir(path):
        path = os.path.join(path, "records.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.1f}"


def _seeds(recs: list[dict], rows: int, key: str | None) -> str:
    sel = sorted((r for r in recs if r["rows"] == rows), key=lambda r: r["seed"])
    if not sel:
        return "-"
    vals = [r["eval_mean"] if key is None else (r.get("train") or {}).get(key) for r in sel]
    return " / ".join(_fmt(v) for v in vals)


def table(runs: dict[str, list[dict]]) -> str:
    names = list(runs)
    rows = sorted({r["rows"] for recs in runs.values() for r in recs})
    out = ["| rows | metric | " + " | ".join(names) + " | reference |",
           "|---|---|" + "---|" * (len(names) + 1)]
    for n in rows:
        for key in (None, *METRICS):
            label = "eval mean" if key is None else key
            ref = "" if key is None else REFERENCE.get(n, {}).get(key, "")
            cells = [_seeds(runs[name], n, key) for name in names]
            out.append(f"| {n:,} | {label} | " + " | ".join(cells) + f" | {ref} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--names", nargs="+")
    args = ap.parse_args()
    names = args.names or [os.path.basename(os.path.normpath(p)) for p in args.runs]
    if len(names) != len(args.runs):
        ap.error("--names needs one name per run")
    print("Per cell: seeds 0 / 1 / 2 (window means of the updates since the previous log "
          "point).\n")
    print(table({n: load(p) for n, p in zip(names, args.runs, strict=True)}))


if __name__ == "__main__":
    main()
