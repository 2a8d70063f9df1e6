"""The sweep's table (Markdown) from every candidate's summary.json in this folder.

Usage (from the repository root): python results/demo_sweep/table.py
A candidate is a folder NAME (its seeds in one process) or folders NAME_s0, NAME_s1, ...
(one process per seed). For each seed: the updates at the first evaluation mean of 150 or
more (the demo ends there), the rows then, and the final evaluation mean of the record.
"""

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEARNED = 150.0


def first_learned(curve: list) -> tuple[int, int] | None:
    """(rows, updates) of the first log point whose evaluation mean reaches LEARNED."""
    for rows, updates, mean in curve:
        if mean >= LEARNED:
            return rows, updates
    return None


def candidates() -> dict[str, list[tuple[str, dict]]]:
    """name -> [(seed, the seed's summary entry with the folder's process figures)]."""
    out: dict[str, list] = {}
    for path in sorted(HERE.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        name = re.sub(r"_s\d+$", "", path.parent.name)
        for seed, entry in summary["seeds"].items():
            entry = dict(entry, process=summary.get("process", {}),
                         command=summary["command"], folder=path.parent.name)
            out.setdefault(name, []).append((seed, entry))
    return out


def row(name: str, seeds: list[tuple[str, dict]]) -> str:
    hits = [first_learned(e["curve"]) for _, e in seeds]
    updates = ", ".join(str(h[1]) if h else "-" for h in hits)
    finals = ", ".join(f"{e['final_eval_mean']:.0f}" for _, e in seeds)
    walls = [e["process"].get("wall_s") for _, e in seeds]
    wall = ", ".join(f"{w:.0f}" for w in walls if w) or "-"
    learned = sum(h is not None for h in hits)
    return (f"| {name} | {', '.join(s for s, _ in seeds)} | {updates} | "
            f"{learned}/{len(seeds)} | {finals} | {wall} |")


def main() -> None:
    print("| candidate | seeds | updates at the first eval >= 150 | learned | "
          "last eval mean | process wall s |")
    print("|---|---|---|---|---|---|")
    for name, seeds in candidates().items():
        print(row(name, sorted(seeds, key=lambda x: int(x[0]))))


if __name__ == "__main__":
    main()
