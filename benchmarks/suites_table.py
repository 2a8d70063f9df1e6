"""results/bench/LOG.md's compiled-suite table from `dreamerjax bench --env ID --out F.json`
files (one per suite), read from one folder.

    python benchmarks/suites_table.py [results/bench/suites_20261201]
"""

from __future__ import annotations

import glob
import json
import os
import sys


def _num(x, digits: int) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def row(r: dict) -> str:
    """One table row of one bench --env JSON."""
    run = r["runs"][0]
    sets = " ".join(r["config"].get("set", []))
    ups = run.get("updates_per_s")
    loads = [x[0] for x in r["loadavg"]]
    return (f"| `{run['env']}` | {f'`{sets}`' if sets else ''} | "
            f"{_num(run.get('acting_rows_per_s'), 0)}; "
            f"{_num(run.get('acting_rows_per_s_median_chunk'), 0)} | {_num(ups, 3)} | "
            f"{_num(1 / ups if ups else None, 2)} | {_num(run['first_chunk_seconds'], 0)} | "
            f"{min(loads):.1f}-{max(loads):.1f} |")


def table(folder: str) -> str:
    paths = sorted(glob.glob(os.path.join(folder, "env_*.json")))
    lines = ["| env | --set | acting rows/s (all chunks; median chunk) | run updates/s | "
             "s / update | first chunk (compile) s | load |", "|---|---|---|---|---|---|---|"]
    return "\n".join(lines + [row(json.load(open(p))) for p in paths]) + "\n"


if __name__ == "__main__":
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(table(sys.argv[1] if len(sys.argv) > 1 else
                os.path.join(here, "results", "bench", "suites_20261201")), end="")
