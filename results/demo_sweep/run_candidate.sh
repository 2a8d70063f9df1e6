#!/usr/bin/env bash
# One demo candidate, as a newcomer runs it: a single `dreamerjax train` process from start
# to exit (compile included) with an empty compilation cache, timed with /usr/bin/time -v.
# Usage (from the repository root): results/demo_sweep/run_candidate.sh NAME WORKDIR -- TRAIN_ARGS...
# Writes WORKDIR/NAME/{run/,time.txt,stdout.txt,cmd.txt}; the run's records.jsonl is
# copied into results/demo_sweep/NAME/ by collect.py.
set -euo pipefail
name=$1; work=$2; shift 3
dir=$work/$name
rm -rf "$dir"; mkdir -p "$dir/cache"
echo "dreamerjax train $* --out runs/$name" > "$dir/cmd.txt"
git rev-parse HEAD > "$dir/commit.txt"
uptime > "$dir/load_before.txt"
XDG_CACHE_HOME=$dir/cache nice -n 15 /usr/bin/time -v -o "$dir/time.txt" \
    .venv/bin/dreamerjax train "$@" --out "$dir/run" > "$dir/stdout.txt" 2>&1 || echo "exit $?" >> "$dir/stdout.txt"
uptime > "$dir/load_after.txt"
