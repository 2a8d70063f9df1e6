"""What a run learned, re-derived from its records: `dreamerjax summary RUN`.

The statistic is the protocol's S1 generalised to any run: per seed, the mean of the
evaluation means (eval_mean, over that log point's episodes) at the chosen log points
(default: the last three); the run's value is the mean over seeds. Nothing is typed in:
every figure comes from records.jsonl, so a committed results folder can be checked by
anyone with `dreamerjax summary results/pendulum`. `--plot FILE` draws the run's curves
(plots.plot_curves) with the statistic and threshold on them. `--against OTHER` puts a
second run beside it (e.g. the reference's records): a table per log point and shared seed
of both runs' evaluation returns and of the train metrics named by `--metrics`, and its
curves on the plot.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from dreamerjax.run.records import RECORDS_FILE, read_jsonl, run_file


@dataclass(frozen=True)
class RunSummary:
    """One run's per-log-point table and its statistic.

    table: rows -> seed -> (updates, eval_mean, train_return); seeds in the order found.
    stat_rows: the log points the statistic averages; per_seed: seed -> its mean there.
    """

    seeds: tuple[int, ...]
    table: dict[int, dict[int, tuple[int, float | None, float | None]]]
    stat_rows: tuple[int, ...]
    per_seed: dict[int, float]
    stat: float
    threshold: float | None
    host: tuple[dict, ...] = ()  # host_table: where the wall time went, per log point

    @property
    def meets(self) -> bool | None:
        if self.threshold is None:
            return None
        return bool(self.stat >= self.threshold)


def _mean(xs) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def read_records(run_dir: str | Path, seeds: tuple[int, ...] | None = None) -> list[dict]:
    """RUN_DIR's records.jsonl, only the seeds named when given; ValueError when the
    records are missing or a seed named has none."""
    path = run_file(run_dir, RECORDS_FILE)
    records = read_jsonl(path)
    if not records:
        raise ValueError(f"{path}: no records (has the run reached its first log point?)")
    if seeds is not None:
        have = {int(r["seed"]) for r in records}
        absent = [s for s in seeds if s not in have]
        if absent:
            raise ValueError(f"--seeds {' '.join(map(str, absent))}: not in {path} "
                             f"(seeds: {' '.join(map(str, sorted(have)))})")
        records = [r for r in records if int(r["seed"]) in seeds]
    return records


def summarize(run_dir: str | Path, rows: tuple[int, ...] | None = None, last: int = 3,
              threshold: float | None = None,
              seeds: tuple[int, ...] | None = None) -> RunSummary:
    """Summary of RUN_DIR's records.jsonl (of the seeds named, default all); ValueError
    naming the problem when the records are missing, a requested log point or seed is
    absent or a seed lacks a log point."""
    records = read_records(run_dir, seeds)
    if last < 1:
        raise ValueError(f"--last {last}: must be at least 1")
    seeds = tuple(dict.fromkeys(int(r["seed"]) for r in records))
    table: dict[int, dict[int, tuple]] = {}
    for r in records:
        table.setdefault(int(r["rows"]), {})[int(r["seed"])] = (
            int(r["updates"]), r.get("eval_mean"), r.get("train_return"))
    table = dict(sorted(table.items()))
    if rows is None:
        rows = tuple(list(table)[-last:])
    missing = [n for n in rows if n not in table]
    if missing:
        raise ValueError(f"--rows {' '.join(map(str, missing))}: no log point there "
                         f"(log points: {', '.join(map(str, table))})")
    per_seed = {}
    for s in seeds:
        lacking = [n for n in rows if s not in table[n]]
        if lacking:
            raise ValueError(f"seed {s} has no record at rows {lacking} "
                             "(the run is unfinished: choose --rows it has)")
        per_seed[s] = _mean(table[n][s][1] for n in rows)
    return RunSummary(seeds, table, tuple(rows), per_seed, _mean(per_seed.values()),
                      threshold, tuple(host_table(records)))


def host_table(records: list[dict]) -> list[dict]:
    """Per log point, where the run's wall time went (run/host_time.py): the first seed's
    `host_s` phases (a run's seeds share one process), its wall_s and `interval_s`, the
    wall time since the previous log point. Empty for records without host_s (runs
    written before it was recorded, or by other tools)."""
    first = next((r["seed"] for r in records if isinstance(r.get("host_s"), dict)), None)
    out, before = [], None
    for r in records:
        if r["seed"] != first or not isinstance(r.get("host_s"), dict):
            continue
        wall = r.get("wall_s")
        interval = None if wall is None else wall - (before if before is not None else 0.0)
        before = wall
        out.append({"rows": int(r["rows"]), "wall_s": wall, "interval_s": interval,
                    **r["host_s"]})
    return out


def host_markdown(entries: tuple[dict, ...] | list[dict]) -> str:
    """host_table's entries as a Markdown table with a total row."""
    phases = list(dict.fromkeys(k for e in entries for k in e
                                if k not in ("rows", "wall_s", "interval_s")))
    lines = ["| rows | interval s | " + " | ".join(f"{p} s" for p in phases)
             + " | outside the chunk |", "|---" * (len(phases) + 3) + "|"]

    def row(label, interval, values):
        outside = (interval - values.get("chunk", 0.0)) / interval if interval else None
        share = "n/a" if outside is None else f"{100 * outside:.0f}%"
        return (f"| {label} | {_f(interval)} | "
                + " | ".join(_f(values.get(p), 2) for p in phases) + f" | {share} |")

    for e in entries:
        lines.append(row(f"{e['rows']:,}", e["interval_s"], e))
    total = {p: sum(e.get(p) or 0.0 for e in entries) for p in phases}
    lines.append(row("all", sum(e["interval_s"] or 0.0 for e in entries), total))
    return "\n".join(lines) + "\n"


def _f(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:,.{digits}f}"


def markdown(s: RunSummary) -> str:
    """The per-log-point table and the statistic as Markdown (a results README's)."""
    head = "| rows | updates per seed | " + " | ".join(f"seed {x}" for x in s.seeds)
    lines = [head + " | mean |", "|---" * (len(s.seeds) + 3) + "|"]
    for n, by_seed in s.table.items():
        ups = sorted({v[0] for v in by_seed.values()})
        evals = [by_seed[x][1] if x in by_seed else None for x in s.seeds]
        lines.append(f"| {n:,} | {' / '.join(f'{u:,}' for u in ups)} | "
                     + " | ".join(_f(e) for e in evals) + f" | {_f(_mean(evals))} |")
    where = " / ".join(f"{n:,}" for n in s.stat_rows)
    lines += ["", f"Statistic (mean over seeds of the mean evaluation return at {where} rows): "
              f"**{_f(s.stat)}**; per seed "
              + ", ".join(f"{x}: {_f(v)}" for x, v in s.per_seed.items()) + "."]
    if s.threshold is not None:
        lines.append(f"Expected at or above {_f(s.threshold)}: **{s.meets}**.")
    if s.host:
        lines += ["", "Where the wall time went (seconds since the previous log point; "
                  "records' host_s, the first seed's):", "", host_markdown(s.host)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _num(x):
    """A JSON-safe number: NaN (a log point without evaluation) as null."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def as_json(s: RunSummary) -> dict:
    return {
        "seeds": list(s.seeds),
        "log_points": [{"rows": n, "seeds": {str(x): {"updates": u, "eval_mean": _num(e),
                                                      "train_return": _num(t)}
                                             for x, (u, e, t) in by_seed.items()}}
                       for n, by_seed in s.table.items()],
        "stat_rows": list(s.stat_rows),
        "per_seed": {str(x): _num(v) for x, v in s.per_seed.items()},
        "stat": _num(s.stat),
        "threshold": s.threshold,
        "meets": s.meets,
        **({"host_s": list(s.host)} if s.host else {}),
    }


def beside(runs: list[tuple[str, list[dict]]], metrics: tuple[str, ...] = ()) -> list[dict]:
    """Runs side by side: one entry per (rows, seed) that every run has, in order, with
    each run's updates, eval_mean and the train metrics named (`record["train"][key]`).

    runs: [(label, records)]; ValueError naming a metric no record of a run carries, or
    when the runs share no log point and seed.
    """
    for label, records in runs:
        carried = set().union(*(r.get("train", {}) for r in records))
        absent = [k for k in metrics if k not in carried]
        if absent:
            raise ValueError(f"--metrics {' '.join(absent)}: not among {label}'s train "
                             "metrics (records.jsonl, key 'train')")
    keyed = [{(int(r["rows"]), int(r["seed"])): r for r in records} for _, records in runs]
    shared = sorted(set.intersection(*(set(k) for k in keyed)))
    if not shared:
        raise ValueError("--against: the runs share no log point and seed")

    def cell(r: dict) -> dict:
        return {"updates": int(r["updates"]), "eval_mean": _num(r.get("eval_mean")),
                **{k: _num(r.get("train", {}).get(k)) for k in metrics}}

    return [{"rows": n, "seed": x,
             "runs": {label: cell(by[n, x]) for (label, _), by in zip(runs, keyed, strict=True)}}
            for n, x in shared]


def beside_markdown(entries: list[dict], metrics: tuple[str, ...] = ()) -> str:
    """beside()'s entries as a Markdown table: each column once per run."""
    labels = list(entries[0]["runs"])
    cols = ["updates", "eval_mean", *metrics]
    head = "| rows | seed | " + " | ".join(f"{c} ({lab})" for c in cols for lab in labels)
    lines = [head + " |", "|---" * (2 + len(cols) * len(labels)) + "|"]
    for e in entries:
        cells = []
        for c in cols:
            for lab in labels:
                v = e["runs"][lab][c]
                cells.append(f"{v:,}" if c == "updates" else
                             _f(v, 1 if c == "eval_mean" else 3))
        lines.append(f"| {e['rows']:,} | {e['seed']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(s: RunSummary, fmt: str, side: list[dict] | None = None,
           metrics: tuple[str, ...] = ()) -> str:
    """The summary as Markdown or JSON; `side` (beside()'s entries) appended when given."""
    if fmt == "json":
        out = as_json(s) | ({} if side is None else {"beside": side})
        return json.dumps(out, indent=1) + "\n"
    return markdown(s) + ("" if side is None else "\n" + beside_markdown(side, metrics))
