"""How a benchmark script hands back its figures: one JSON object on stdout, and the same
to --out when given. Imported by the scripts beside it
(`python benchmarks/experiments/X.py` puts this folder first on sys.path)."""

from __future__ import annotations

import json


def emit(result: dict, out: str | None) -> int:
    """Prints `result` as indented JSON, writes it to `out` too if set; returns 0."""
    text = json.dumps(result, indent=1)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0
