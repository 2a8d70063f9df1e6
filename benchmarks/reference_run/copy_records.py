"""Copy a harness run directory's records into a results folder (again whenever the run has
gone further): records.jsonl, episodes.jsonl, timing.json (once the run has finished) and
harness.json. Standard library only.

    python benchmarks/reference_run/copy_records.py RUN_DIR results/<folder>/reference_s0

The machine's paths stay behind (harness.json's `checkout` becomes REFERENCE_CHECKOUT), and
so does config.yaml, the reference's resolved configuration (its own defaults, written out
by the reference: benchmarks/reference_run/README.md lists what the harness overrides). The
records are copied up to their last complete line (a run
may be writing while they are copied); a file the run has not written yet is skipped, and
a timing.json left in the folder by an earlier copy is removed when the run has none
(it was resumed since). Prints what it copied, as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LINES = ("records.jsonl", "episodes.jsonl")


def complete_lines(text: str) -> str:
    """Up to the last newline: a line being written is left for the next copy."""
    return text[: text.rfind("\n") + 1]


def copy_records(run: Path, dest: Path) -> dict:
    if not (run / "harness.json").exists():
        raise SystemExit(f"{run}: no harness.json, not a run directory of the harness")
    dest.mkdir(parents=True, exist_ok=True)
    copied = {}
    for name in LINES:
        if (run / name).exists():
            text = complete_lines((run / name).read_text())
            (dest / name).write_text(text)
            copied[name] = text.count("\n")
    options = json.loads((run / "harness.json").read_text())
    options["checkout"] = "REFERENCE_CHECKOUT"
    (dest / "harness.json").write_text(json.dumps(options, indent=1) + "\n")
    copied["harness.json"] = 1
    if (run / "timing.json").exists():
        (dest / "timing.json").write_text((run / "timing.json").read_text())
        copied["timing.json"] = 1
    elif (dest / "timing.json").exists():
        (dest / "timing.json").unlink()
    return copied


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="the harness's --out directory")
    p.add_argument("dest", type=Path, help="the results folder to write")
    args = p.parse_args(argv)
    print(json.dumps(copy_records(args.run, args.dest)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
