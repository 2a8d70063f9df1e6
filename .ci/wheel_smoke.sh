#!/usr/bin/env bash
# The package as a user gets it: a wheel built from this tree, installed into a fresh venv
# (pip's cache reused), then, from an empty directory, `dreamerjax envs`, one tiny training
# run and its evaluation video, `dreamerjax parity` without fixtures and a logger whose
# extra is missing. Prints the seconds since the start after each step. PYTHON picks the interpreter (default python3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
step() { echo "wheel_smoke: $1 ($(( SECONDS - start )) s)"; }
start=$SECONDS

# The tree's files (tracked and untracked, not ignored), built outside it: no build/ or
# egg-info left in the checkout.
mkdir "$work/src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
   | tar -cf - --null --ignore-failed-read -T - 2>/dev/null) | tar -xf - -C "$work/src"
"${PYTHON:-python3}" -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip wheel -q --no-deps --wheel-dir "$work/dist" "$work/src" 2>&1 | tail -n 3
step "built $(basename "$work"/dist/*.whl)"
"$py" -m pip install -q "$work"/dist/*.whl 2>&1 | tail -n 3
step "installed the wheel into a fresh venv"

mkdir "$work/empty"
cd "$work/empty"
dj="$work/venv/bin/dreamerjax"
"$dj" envs > envs.txt
grep -q "pip install 'dreamerjax\[craftax\]'" envs.txt
if grep -q "pip install -e" envs.txt; then
  echo "wheel_smoke: an installed package must not suggest 'pip install -e'" >&2; exit 1
fi
step "dreamerjax envs names pip install 'dreamerjax[EXTRA]'"

"$dj" train --env CartPole-v1 --tiny --seeds 0 --steps 800 --eval-every 400 \
  --eval-episodes 2 --num-envs 4 --no-compile-cache --out runs/smoke > train.txt 2>&1 \
  || { cat train.txt; exit 1; }
test "$(wc -l < runs/smoke/records.jsonl)" -eq 2
test -s runs/smoke/curves.png
test -d runs/smoke/tb
step "a tiny run from an empty directory: $(tail -n 2 train.txt | head -n 1)"

# What `dreamerjax demo` adds to a run (the report and the episode video), on this run.
"$dj" eval runs/smoke --episodes 1 --report --video runs/smoke/episode.mp4 > eval.txt 2>&1 \
  || { cat eval.txt; exit 1; }
test -s runs/smoke/episode.mp4
step "dreamerjax eval --report --video on it"

code=0
"$dj" parity > parity.txt 2>&1 || code=$?
test "$code" -eq 2 && grep -q "tests/data/reference of a dreamerjax source checkout" parity.txt
step "dreamerjax parity says where the fixtures are"

code=0
"$dj" train --env CartPole-v1 --tiny --out runs/w --set logger.outputs=jsonl,wandb \
  > wandb.txt 2>&1 || code=$?
test "$code" -eq 2 && test "$(wc -l < wandb.txt)" -eq 1
grep -q "logger.outputs: wandb needs the wandb package (not installed): pip install 'dreamerjax\[wandb\]'$" wandb.txt
test ! -e runs/w
step "a missing logger extra is one line naming it"
echo "wheel_smoke: ok in $(( SECONDS - start )) s"
