#!/usr/bin/env bash
# `dreamerjax demo --seed S` as a newcomer runs it (the venv built, an empty compilation
# cache), timed with /usr/bin/time -v; nothing else running on the machine.
# Usage (from the repository root): results/demo_sweep/time_demo.sh SEED WORKDIR
# Writes WORKDIR/demo_sS/{run/,time.txt,stdout.txt,cmd.txt}; collect.py copies the records.
set -euo pipefail
seed=$1; work=$2
dir=$work/demo_s$seed
rm -rf "$dir"; mkdir -p "$dir/cache"
echo "dreamerjax demo --seed $seed --out runs/demo_s$seed" > "$dir/cmd.txt"
git rev-parse HEAD > "$dir/commit.txt"
uptime > "$dir/load_before.txt"
XDG_CACHE_HOME=$dir/cache /usr/bin/time -v -o "$dir/time.txt" \
    .venv/bin/dreamerjax demo --seed "$seed" --out "$dir/run" > "$dir/stdout.txt" 2>&1 || echo "exit $?" >> "$dir/stdout.txt"
uptime > "$dir/load_after.txt"
