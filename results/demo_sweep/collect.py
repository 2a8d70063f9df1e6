"""Copy one sweep run's records into results/demo_sweep/NAME/ and summarise it.

Usage (from the repository root): python results/demo_sweep/collect.py WORKDIR NAME [NAME ...]
WORKDIR/NAME is what run_candidate.sh wrote. Copies records.jsonl, episodes.jsonl and
config.json (with the run directory's path replaced by runs/NAME), the command, commit,
load averages and /usr/bin/time's figures, and writes NAME/summary.json: per seed the
evaluation mean at each log point, the final one, and the process's wall and CPU seconds.
"""

import json
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _time_fields(text: str) -> dict:
    out = {}
    for key, name in (("Elapsed (wall clock) time (h:mm:ss or m:ss)", "wall_s"),
                      ("User time (seconds)", "user_s"), ("System time (seconds)", "sys_s"),
                      ("Maximum resident set size (kbytes)", "max_rss_kb")):
        m = re.search(re.escape(key) + r": (\S+)", text)
        if not m:
            continue
        value = m.group(1)
        if name == "wall_s":
            parts = [float(p) for p in value.split(":")]
            value = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
        out[name] = float(value)
    return out


def collect(work: Path, name: str) -> dict:
    src, dst = work / name, HERE / name
    dst.mkdir(exist_ok=True)
    run = src / "run"
    for f in ("records.jsonl", "episodes.jsonl", "config.json"):
        if (run / f).exists():
            text = (run / f).read_text().replace(str(run), f"runs/{name}")
            text = text.replace(str(work), "WORKDIR")
            (dst / f).write_text(text)
    for f in ("cmd.txt", "commit.txt", "load_before.txt", "load_after.txt"):
        if (src / f).exists():
            shutil.copy(src / f, dst / f)
    timing = _time_fields((src / "time.txt").read_text()) if (src / "time.txt").exists() else {}
    records = [json.loads(line) for line in (dst / "records.jsonl").read_text().splitlines()
               if line.strip()]
    seeds = sorted({r["seed"] for r in records})
    per_seed = {}
    for s in seeds:
        rs = [r for r in records if r["seed"] == s]
        per_seed[str(s)] = {"curve": [[r["rows"], r["updates"], r["eval_mean"]] for r in rs],
                            "final_eval_mean": rs[-1]["eval_mean"],
                            "final_eval_returns": rs[-1]["eval_returns"],
                            "loop_wall_s": round(rs[-1]["wall_s"], 1)}
    summary = {"name": name, "command": (src / "cmd.txt").read_text().strip(),
               "commit": (src / "commit.txt").read_text().strip(),
               "process": timing, "seeds": per_seed}
    (dst / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    work = Path(sys.argv[1])
    for name in sys.argv[2:]:
        s = collect(work, name)
        finals = {k: v["final_eval_mean"] for k, v in s["seeds"].items()}
        print(name, s["process"].get("wall_s"), finals)
