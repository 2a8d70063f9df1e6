#!/bin/bash
# A dreamerjax whole run of 3 seeds (the protocol's CartPole configuration, the first 2,000
# rows, one evaluation) with run.seed_loop map and then threads, one after the other, each
# with an empty compilation cache; wall seconds and peak RSS per arm, and whether the two
# runs' records and episodes are equal apart from their timing fields.
#   bash benchmarks/experiments/seed_loop_whole_run.sh WORKDIR > results/bench/seed_loop_whole_run_DATE.json
set -eu
work=${1:?usage: seed_loop_whole_run.sh WORKDIR}
cd "$(dirname "$0")/../.."
for how in map threads; do
  d=$work/$how; rm -rf "$d"; mkdir -p "$d/xdg"
  s=$(date +%s.%N)
  XDG_CACHE_HOME=$d/xdg /usr/bin/time -v -o "$d/time.txt" .venv/bin/python -m dreamerjax.tools.cli \
    train --env CartPole-v1 --size 1m --seeds 0 1 2 --steps 2000 --eval-every 2000 \
    --eval-episodes 10 --num-envs 16 --train-ratio 512.0 --set run.seed_loop=$how \
    --out "$d/run" > "$d/log.txt" 2>&1
  echo "$(date +%s.%N) - $s" | bc > "$d/wall.txt"
done
.venv/bin/python - "$work" <<'PY'
import json, re, subprocess, sys
work = sys.argv[1]
timing = re.compile(r"wall|host|seconds|per_s|time")
def lines(path):
    return [{k: v for k, v in json.loads(x).items() if not timing.search(k)}
            for x in open(path)]
out = {"command": "bash benchmarks/experiments/seed_loop_whole_run.sh WORKDIR",
       "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip(), "arms": {}}
for how in ("map", "threads"):
    d = f"{work}/{how}"
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{d}/time.txt").read())
    out["arms"][how] = {"wall_s": float(open(f"{d}/wall.txt").read()),
                        "peak_rss_mib_main_process": int(rss.group(1)) / 1024,
                        "last_record": json.loads(open(f"{d}/run/records.jsonl").readlines()[-1])}
for name in ("records", "episodes"):
    out[f"{name}_equal_but_timing"] = (lines(f"{work}/map/run/{name}.jsonl")
                                       == lines(f"{work}/threads/run/{name}.jsonl"))
out["threads_speedup"] = out["arms"]["map"]["wall_s"] / out["arms"]["threads"]["wall_s"]
print(json.dumps(out, indent=1))
PY
