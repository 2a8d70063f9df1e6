#!/usr/bin/env bash
# A DeepMind Control curve as the reference publishes it, trained in pieces that each fit a
# job's time limit: every call trains RUN_DIR (a new run, or `--resume` where RUN_DIR has
# one) for at most LIMIT seconds, stopping at a log point, then copies the run's records
# to OUT and, given the reference's scores file, compares and plots the curve so far.
#
#   LIMIT=540 SCORES=reference_scores/dmc_proprio-dreamerv3.json.gz \
#       bash benchmarks/dmc_curve.sh runs/dmc_balance results/dmc_balance
#   (again, until it exits 0)
#   TASK=playground_CartpoleSwingup ... bash benchmarks/dmc_curve.sh runs/dmc_swingup OUT
#   SMOKE=1 ROWS=96 bash benchmarks/dmc_curve.sh RUN OUT   # tiny, on a CPU
#
#   TASK=dmc_walker_walk SIZE=12m DTYPE=bfloat16 LIMIT=540 bash benchmarks/dmc_curve.sh RUN OUT
#
# Knobs (environment): TASK (playground_CartpoleBalance; dmc_cartpole_balance,
# dmc_walker_walk, ... are dm_control's own, through the host path), SIZE (1m; the preset's
# is 12m), DTYPE (jax.compute_dtype; unset: dreamerjax's float32, the reference's runs used
# bfloat16), REFERENCE (--reference: 29eb964 unless set; its dmc_proprio trains at ratio
# 512, e3f0224's at 1024), EXTRA (more `train` flags for a new run, split at spaces, e.g.
# "--driver-parallel"), SEEDS ("0 1 2"), ROWS (51200: 102,400 env frames at action repeat
# 2), EVAL_EVERY (2560), EVAL_EPISODES (5), CHECKPOINT_EVERY (8 log points: a 12m
# checkpoint of 3 seeds took 25-31 s on a TPU v5e chip, most of a log interval; a call cut
# by LIMIT checkpoints where it stops anyway), LIMIT (s of
# this call's training; 0: no limit; then SIGTERM: the run stops after the log interval
# it is in and its checkpoint), KILL_AFTER (60: seconds from SIGTERM to SIGKILL; under a
# log interval and a checkpoint, that interval is trained again next call), SCORES (the reference's
# scores/dmc_proprio-dreamerv3.json.gz, read, never copied; docs/performance.md says where
# it comes from), PYTHON (python3), SMOKE (1: the tiny network, 2 envs, short episodes; a
# check that it runs), MUJOCO_GL (disable for a dmc_ TASK: the preset renders nothing, and
# a machine without OpenGL libraries cannot import dm_control with egl).
# SIZE, DTYPE, REFERENCE and EXTRA shape a new run; a resumed run keeps its settings.
#
# EXPORT (1: once RUN_DIR has reached ROWS, each seed's policy is exported with `dreamerjax
# export` to OUT/policy_seed<S>.npz and played from that file by `dreamerjax eval` for
# POLICY_EPISODES (10) episodes into OUT/policy_seed<S>.eval.json; a file over
# POLICY_MAX_MB (8) is removed after its evaluation).
#
# Exit status: 0 when RUN_DIR has reached ROWS, 3 when it stopped before (call again), else
# the run's. OUT gets config.json, records.jsonl.gz, episodes.jsonl.gz and, with SCORES,
# compare.json and curve.png (benchmarks/gpu_check.py compare).
set -u
cd "$(dirname "$0")/.."
RUN=${1:?usage: dmc_curve.sh RUN_DIR OUT}
OUT=${2:?usage: dmc_curve.sh RUN_DIR OUT}
PY=${PYTHON:-python3}
TASK=${TASK:-playground_CartpoleBalance}
ROWS=${ROWS:-51200}
LIMIT=${LIMIT:-0}
args=(--steps "$ROWS")
if [ -f "$RUN/config.json" ]; then
    args+=(--resume "$RUN")
else
    read -r -a seeds <<< "${SEEDS:-0 1 2}"
    args+=(--env "$TASK" --configs dmc_proprio --seeds "${seeds[@]}" --out "$RUN"
           --eval-every "${EVAL_EVERY:-2560}" --eval-episodes "${EVAL_EPISODES:-5}"
           --checkpoint-every "${CHECKPOINT_EVERY:-8}" --report-every 0)
    [ -n "${DTYPE:-}" ] && args+=(--set "jax.compute_dtype=$DTYPE")
    [ -n "${REFERENCE:-}" ] && args+=(--reference "$REFERENCE")
    if [ -n "${EXTRA:-}" ]; then read -r -a extra <<< "$EXTRA"; args+=("${extra[@]}"); fi
    if [ "${SMOKE:-0}" = 1 ]; then
        args+=(--tiny --num-envs 2 --set wrapper.length=40 --set batch_size=4
               --set batch_length=17 --set run.train_ratio=32)
    else
        args+=(--size "${SIZE:-1m}")
    fi
fi
case $TASK in dmc_*) export MUJOCO_GL=${MUJOCO_GL:-disable} ;; esac
limit=()
(( LIMIT > 0 )) && limit=(timeout --kill-after="${KILL_AFTER:-60}" "$LIMIT")  # SIGTERM: stop at a log point
"${limit[@]}" "$PY" -m dreamerjax.tools.cli train "${args[@]}"
rc=$?
mkdir -p "$OUT"
cp "$RUN/config.json" "$OUT/" 2>/dev/null
for f in records episodes; do
    [ -f "$RUN/$f.jsonl" ] && gzip -9 -n -c "$RUN/$f.jsonl" > "$OUT/$f.jsonl.gz"
done
if [ -n "${SCORES:-}" ] && [ -f "$OUT/records.jsonl.gz" ]; then
    "$PY" benchmarks/gpu_check.py compare "$OUT" --scores "$SCORES" --out "$OUT/compare.json" \
        --plot "$OUT/curve.png" || echo "dmc_curve: the comparison failed" >&2
fi
reached=$("$PY" -c 'import json, sys
rows = [json.loads(x)["rows"] for x in open(sys.argv[1]) if x.strip()]
print(max(rows, default=0))' "$RUN/records.jsonl" 2>/dev/null || echo 0)
echo "dmc_curve: $RUN at $reached of $ROWS rows (train exited $rc)"
if (( reached >= ROWS )); then
    # The trained policies, each played by `eval` from the exported file itself; a file
    # over POLICY_MAX_MB is removed after its evaluation (the repository keeps small ones).
    if [ "${EXPORT:-1}" = 1 ]; then
        read -r -a run_seeds <<< "$("$PY" -c 'import json, sys
print(*json.load(open(sys.argv[1]))["seeds"])' "$RUN/config.json")"
        for s in "${run_seeds[@]}"; do
            policy="$OUT/policy_seed$s.npz"
            "$PY" -m dreamerjax.tools.cli export "$RUN" --seed "$s" --out "$policy" &&
            "$PY" -m dreamerjax.tools.cli eval "$policy" \
                --episodes "${POLICY_EPISODES:-10}" > "$OUT/policy_seed$s.eval.json" ||
                { echo "dmc_curve: exporting or playing seed $s's policy failed" >&2; exit 1; }
            if (( $(stat -c %s "$policy") > ${POLICY_MAX_MB:-8} * 1024 * 1024 )); then
                echo "dmc_curve: $policy is over POLICY_MAX_MB=${POLICY_MAX_MB:-8}: removed"
                rm "$policy"
            fi
        done
    fi
    exit 0
fi
case $rc in 0|124|137|143) exit 3 ;; *) exit "$rc" ;; esac
