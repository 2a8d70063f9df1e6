"""Print the README's side-by-side table from one JSON written by run.py, or the whole-run
table from one written by whole_run.py.

    python benchmarks/side_by_side/table.py [results/bench/side_by_side_YYYYMMDD.json]
    python benchmarks/side_by_side/table.py --whole-run [results/bench/whole_run_*.json]

Without a file, the newest results/bench/side_by_side_*.json (whole_run_*.json with
--whole-run); a whole-run file is recognised by its "kind" either way. Every ratio is taken
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


WHOLE_RUN_LABELS = {
    "reference": "reference 29eb964 (run_reference.py, CartPole port)",
    "ajax": "Ajax (`DreamerV3.train`)",
    "dreamerjax": "dreamerjax (`dreamerjax train`)",
}


def _whole_run_row(name: str, rec: dict) -> str:
    label = WHOLE_RUN_LABELS.get(name, name)
    if name == "reference" and rec["seeds"] > 1:
        label += f", {rec['seeds']} processes at once"
    if "error" in rec:
        return f"| {label} | {rec['seeds']} | failed: {rec['error']} | | | | |"
    rate = (lambda k: f"{rec[k]:.1f}" if k in rec else "n/a")  # noqa: E731
    ratio = rec.get("per_seed_over_dreamerjax")
    return (f"| {label} | {rec['seeds']} | {rec['wall_s']:.0f} s | {rate('rows_per_s')} "
            f"| {rate('updates_per_s')} | {rec.get('updates', 'n/a')} "
            f"| {_gib(rec['peak_rss_mib'])} | {f'{ratio:.2f}x' if ratio else ''} |")


def whole_run_markdown(r: dict) -> str:
    """The whole-run table (one row per program and phase) from one whole_run.py result.
    Rates are over all seeds of a phase (rows and updates summed over seeds, divided by the
    phase's wall seconds); the last column is seconds per seed over dreamerjax's in the
    same phase."""
    m, cfg = r["machine"], r["config"]
    lines = [
        f"Whole runs on {m['cpu']} ({m['cores']} cores), {r['date']}: the first "
        f"{cfg['rows_per_seed']:,} rows per seed of CartPole-v1, {cfg['size']}, "
        f"{cfg['num_envs']} envs, train ratio {cfg['train_ratio']:g}, evaluation every "
        f"{cfg['eval_every']:,} rows ({cfg['eval_episodes']} episodes)"
        + (", TINY networks (smoke only)" if cfg.get("tiny") else "")
        + f"; process start to exit, compile included; load average before "
        f"{r['loadavg_before']}, after {r.get('loadavg_after')}.",
        "",
        "| program | seeds | wall | rows / s | updates / s | updates | peak RSS "
        "| s per seed / dreamerjax |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, phase in sorted(r["phases"].items(), key=lambda kv: int(kv[0])):
        for name in cfg["order"]:
            if name in phase:
                lines.append(_whole_run_row(name, phase[name]))
    for name, why in r.get("skipped", {}).items():
        lines.append(f"\n{name} skipped: {why}")
    return "\n".join(lines) + "\n"


def newest(prefix: str = "side_by_side") -> str:
    """The JSON of that kind whose run started last (its own `date`, not its file name)."""
    paths = glob.glob(os.path.join(REPO, "results", "bench", f"{prefix}_*.json"))
    if not paths:
        raise SystemExit(f"no results/bench/{prefix}_*.json; run "
                         f"{'whole_run.py' if prefix == 'whole_run' else 'run.py'} first")

    def started(path: str) -> str:
        with open(path) as f:
            return json.load(f).get("date", "")

    return max(paths, key=started)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    whole = "--whole-run" in argv
    argv = [a for a in argv if a != "--whole-run"]
    if len(argv) > 1:
        raise SystemExit("usage: table.py [--whole-run] [JSON]")
    path = argv[0] if argv else newest("whole_run" if whole else "side_by_side")
    with open(path) as f:
        result = json.load(f)
    show = whole_run_markdown if result.get("kind") == "whole_run" else markdown
    print(show(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
