"""Where a `dreamerjax train` command's wall time goes outside its log intervals: seconds
from the process's start to each of its moments, printed as JSON.

    python benchmarks/startup_phases.py [--src DIR ...] [--variant NAME:FLAGS ...] \
        [--rounds N] [--out FILE] [-- TRAIN FLAGS]

Each run is a fresh process with an empty compilation cache of its own (a cold compile, as
a first run on a machine), training into a temporary directory. The moments come from what
the run writes: the lines it prints on stderr, stamped as they arrive (`compile_started`:
its "compiling, then training" line; `first_log_point`, `last_log_point`: its "rows N"
lines), the process's exit, and, where the run writes one, run_dir/timing.json
(run/host_time.Timeline: `jax_ready`, JAX imported and its backend up; `plan`; the
precompile child done and the programs loaded, `programs_ready`; `end`, before the
process exits; the phases). `--src DIR ...` runs the package of each source tree (e.g. a
worktree of another commit; PYTHONPATH=DIR), alternated round by round on this machine, so
that two versions are compared under the same conditions; `--variant NAME:FLAGS` (given
several times) adds each variant's train flags in turn, alternated the same way (e.g.
`--variant child: --variant here:--compile-here`: where the run's programs compile). Each
run's records.jsonl values less their timing fields are compared between the sources and
variants (`records_equal`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# A small real run of the CartPole protocol's kind: two log points, updates in the second.
DEFAULT_FLAGS = ["--env", "CartPole-v1", "--tiny", "--seeds", "0", "--steps", "2048",
                 "--eval-every", "1024", "--eval-episodes", "10"]
TIMING_FIELDS = ("wall_s", "host_s")  # records.TIMING_FIELDS


def run_once(src: str | None, flags: list[str], workdir: Path) -> dict:
    """One `dreamerjax train` process of the package at src (None: the installed one)."""
    out, cache = workdir / "run", workdir / "cache"
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
    argv = [sys.executable, "-m", "dreamerjax.tools.cli", "train", *flags, "--out", str(out)]
    lines: list[tuple[float, str]] = []
    t0 = time.time()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)

    def read():
        for line in proc.stderr:
            lines.append((time.time() - t0, line.rstrip()))

    reader = threading.Thread(target=read)
    reader.start()
    code = proc.wait()
    exit_s = time.time() - t0
    reader.join()
    if code:
        raise SystemExit(f"{argv} exited {code}:\n" + "\n".join(x for _, x in lines[-20:]))
    compiling = [t for t, x in lines if "compiling, then training" in x]
    points = [t for t, x in lines if x.startswith("[dreamerjax] rows ")]
    result = {"src": src, "exit": round(exit_s, 2),
              "compile_started": round(compiling[0], 2) if compiling else None,
              "first_log_point": round(points[0], 2) if points else None,
              "last_log_point": round(points[-1], 2) if points else None}
    timing = out / "timing.json"
    if timing.exists():
        own = json.loads(timing.read_text())
        # the run's own moments, from the process's start by its own clock; this script's
        # clock started just before it (the interpreter's start-up in between)
        result["timing_json"] = own
        for name in ("jax_ready", "plan", "programs_ready", "end"):
            result[name] = own["seconds"].get(name)
    with open(out / "records.jsonl") as f:
        result["records"] = [{k: v for k, v in json.loads(x).items()
                              if k not in TIMING_FIELDS} for x in f]
    return result


MOMENTS = ("jax_ready", "plan", "compile_started", "programs_ready", "first_log_point",
           "last_log_point", "end", "exit")


def label(run: dict) -> str:
    """A run's source and variant, as by_src names them ("None" alone: the installed
    package without a variant)."""
    return " ".join(x for x in (str(run["src"]), run.get("variant") or "") if x)


def by_src(runs: list[dict]) -> dict:
    """Each source's (and variant's) median seconds to each moment over its runs (and the
    runs' count)."""
    import statistics

    out = {}
    for name_ in dict.fromkeys(label(r) for r in runs):
        mine = [r for r in runs if label(r) == name_]
        row = {"runs": len(mine)}
        for name in MOMENTS:
            values = [r[name] for r in mine if r.get(name) is not None]
            if values:
                row[name] = round(statistics.median(values), 2)
        out[name_] = row
    return out


def variants(specs: list[str] | None) -> list[tuple[str, list[str]]]:
    """--variant NAME:FLAGS values as (name, extra train flags); none: one unnamed variant
    without flags."""
    import shlex

    if not specs:
        return [("", [])]
    out = []
    for spec in specs:
        name, sep, flags = spec.partition(":")
        if not sep or not name:
            raise SystemExit(f"--variant {spec!r}: NAME:FLAGS (e.g. here:--compile-here)")
        out.append((name, shlex.split(flags)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", nargs="*", default=[None],
                        help="source trees to run (PYTHONPATH), alternated; default the "
                             "installed package")
    parser.add_argument("--variant", action="append", metavar="NAME:FLAGS",
                        help="train flags added in turn (given several times), alternated")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("flags", nargs="*", help="train flags after --")
    args = parser.parse_args()
    flags = args.flags or DEFAULT_FLAGS
    kinds = variants(args.variant)
    runs = []
    for round_index in range(args.rounds):
        for src in args.src:
            for variant, extra in kinds:
                with tempfile.TemporaryDirectory() as tmp:
                    result = run_once(src, [*flags, *extra], Path(tmp))
                result.update(round=round_index, variant=variant)
                print(json.dumps({k: v for k, v in result.items()
                                  if k not in ("records", "timing_json")}), file=sys.stderr)
                runs.append(result)
    first = runs[0]["records"]
    summary = {"command": ["python", "benchmarks/startup_phases.py", *sys.argv[1:]],
               "flags": flags, "variants": {name: extra for name, extra in kinds if name},
               "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
               "records_equal": all(r["records"] == first for r in runs),
               "median_by_src": by_src(runs),
               "runs": [{k: v for k, v in r.items() if k != "records"} for r in runs]}
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
