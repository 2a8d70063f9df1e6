"""How far apart 3-seed runs of the CartPole protocol fall by chance alone.

The protocol's statistic A is the mean over 3 seeds of S1 (a seed's mean evaluation return
at 16,000 / 18,000 / 20,000 rows, 10 episodes each), and WITHIN_RANGE asks whether A lies
in the reference's 3-seed S1 range [241, 386]. This reads the per-seed S1 of every run
given (records.jsonl, as `dreamerjax compare` computes it) and asks, treating all those
seeds as draws of one distribution (the hypothesis that the runs differ only by chance):

- the pooled mean and standard deviation of a seed's S1;
- by resampling 3 of the pooled seeds (with replacement, 100,000 times), how often a
  3-seed A falls below 241, above 386, or at or below the lowest run's A;
- exactly, over every way to pick a group of as many seeds as the named run has from the
  pool, the share whose mean S1 is at or below that run's (a permutation test).

    python benchmarks/protocol_scatter.py results/cartpole_protocol \
        results/cartpole_protocol_pairsum results/cartpole_protocol_gym \
        --test results/cartpole_protocol_gym

Prints one JSON object. The same for `--rows` other than S1's (e.g. every log point from
4,000 rows: --rows 4000 6000 ... 20000) to use more of each seed's curve.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from dreamerjax.tools.protocol.inputs import load_record_set
from dreamerjax.tools.protocol.statistics import (
    REFERENCE_RANGE_S1,
    S1_ROWS_FULL,
    s1_per_seed,
)

LO, HI = REFERENCE_RANGE_S1


def seed_values(run: str, rows: tuple[int, ...]) -> dict[int, float]:
    """{seed: mean eval_mean over `rows`} of a run directory or a records folder."""
    rs = load_record_set(run)
    seeds = tuple(sorted({int(r["seed"]) for r in rs.records}))
    return s1_per_seed(rs, seeds, rows)


def scatter(runs: dict[str, dict[int, float]], test: str | None, draws: int = 100_000,
            seed: int = 0) -> dict:
    pool = np.array([v for vals in runs.values() for v in vals.values()])
    rng = np.random.default_rng(seed)
    a = rng.choice(pool, size=(draws, 3), replace=True).mean(axis=1)
    means = {name: float(np.mean(list(v.values()))) for name, v in runs.items()}
    lowest = min(means.values())
    out = {
        "runs": {name: {"per_seed": {str(s): round(x, 1) for s, x in v.items()},
                        "A": round(means[name], 1)} for name, v in runs.items()},
        "pool": {"seeds": int(pool.size), "mean": round(float(pool.mean()), 1),
                 "sd": round(float(pool.std(ddof=1)), 1)},
        "resampled_A": {"draws": draws, "sd": round(float(a.std()), 1),
                        f"p_below_{LO:g}": round(float((a < LO).mean()), 3),
                        f"p_above_{HI:g}": round(float((a > HI).mean()), 3),
                        "p_outside_range": round(float(((a < LO) | (a > HI)).mean()), 3),
                        f"p_at_or_below_{lowest:.1f}": round(float((a <= lowest).mean()), 3)},
    }
    if test is not None:
        k = len(runs[test])
        groups = [np.mean(g) for g in itertools.combinations(pool, k)]
        out["permutation"] = {
            "run": test, "groups": len(groups),
            "p_mean_at_or_below": round(float(np.mean(
                np.array(groups) <= means[test] + 1e-9)), 4)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run directories or records folders")
    p.add_argument("--test", help="the run whose A the permutation test places")
    p.add_argument("--rows", type=int, nargs="+", default=list(S1_ROWS_FULL),
                   help="log points averaged per seed (default: S1's)")
    a = p.parse_args()
    runs = {str(Path(r)): seed_values(r, tuple(a.rows)) for r in a.runs}
    test = None if a.test is None else str(Path(a.test))
    if test is not None and test not in runs:
        p.error(f"--test {a.test}: not among the runs")
    print(json.dumps({"rows": a.rows, **scatter(runs, test)}))


if __name__ == "__main__":
    main()
