#!/usr/bin/env bash
# The prepared GPU check: one command for a machine with a GPU, finished within BUDGET seconds
# (default 540, 9 minutes), that benches the update and trains a DeepMind Control task
# compiled into the loop, then compares the run with the reference's published curve.
#
#   SCORES=reference_scores/dmc_proprio-dreamerv3.json.gz benchmarks/gpu_check.sh OUT
#   SMOKE=1 SCORES=FILE benchmarks/gpu_check.sh OUT   # on a CPU: tiny, 2 seeds, 160 rows
#   SMOKE=1 BENCH_S=250 SCORES=FILE benchmarks/gpu_check.sh OUT   # ... and tiny benches
#   SMOKE=1 DATA_S=300 TRAIN_S=0 benchmarks/gpu_check.sh OUT   # the data stage on 2 mock CPUs
#   SMOKE=1 REPLAY_S=400 TRAIN_S=0 benchmarks/gpu_check.sh OUT # the replay stage on the CPU
#
# Knobs (environment): BUDGET (s, 540), BENCH_S (the first bench's limit, 100; 0: no
# benches), DATA_S (the data stage's limit, 90; 0: skipped; with SMOKE=1 0 unless set),
# REPLAY_S (the replay stage's limit, 90; 0: skipped; with SMOKE=1 0 unless set),
# TRAIN_S (290), SEEDS ("0 1 2 3"), ROWS (64000), EVAL_EVERY (2000), PYTHON (python3), WORK
# (a fresh temporary folder).
#
# SCORES is the reference's scores/dmc_proprio-dreamerv3.json.gz (danijar/dreamerv3 at
# 29eb964), read at run time and never copied into this repository (docs/performance.md,
# "GPU check, prepared", says how to pass it to the device). Stages, in order, each under
# its own `timeout` inside what is left of BUDGET; OUT/gpu_check.json is rewritten after
# every stage, so a stage that is killed loses only itself:
#
#   devices  jax.devices(), package versions, whether Playground imports; without a GPU
#            the check stops here (exit 2) unless SMOKE=1
#   bench    benchmarks/gpu.sh for the 1m float32 update (the CartPole protocol's, the one
#            the CPU figures of docs/performance.md measure), 1 and 16 vmapped seeds
#   data     benchmarks/data_parallel.py: one seed of that configuration trained
#            data-parallel (jax.train_devices) over N = 1, 2, 4, ... of the machine's
#            devices, each N in its own process, the chunks after the replay's gate timed;
#            the Ns finished within DATA_S are kept. With SMOKE=1 (tiny, 1 timed chunk
#            of 1 tick) on 2 mock CPU devices (XLA_FLAGS=...device_count=2 for that
#            process alone): a check that it runs, no speed figure
#   train    playground_CartpoleBalance configured as the reference runs dmc_proprio
#            (--configs dmc_proprio: 12m, train ratio 512, 16 envs per seed, action repeat
#            2) with the reference's bfloat16 compute, SEEDS vmapped, evaluated every
#            EVAL_EVERY rows; killed at its limit, it keeps the log points it reached
#   replay   benchmarks/replay_memory.py: the 1m CartPole chunk with run.replay_memory
#            device and host side by side (3 timed chunks each, alternating), seconds per
#            update and their ratio; with SMOKE=1 the tiny network, 1 timed chunk each
#   bench2   benchmarks/gpu.sh for the 12m bfloat16 update (the train stage's), with the
#            time that is left
#
# Sizing of the train stage (an estimate: no GPU figure of dreamerjax existed when this was
# written). The 12m update is ~0.2 TFLOP per seed in the RSSM's matmuls alone
# (bench.analytic_flops), ~0.45 TFLOP with the heads (the 1m's full count is 2.25x its
# analytic one): a few ms per seed at a third of the H200's bfloat16 peak, on top of a
# latency floor of the sequential scans (64 observe steps forward and backward, 15
# imagination steps) of perhaps 10 ms. With 4 seeds vmapped, ~15-25 ms per update, one
# update per 2 rows at train ratio 512: in the ~200 s of TRAIN_S left after start-up and
# compile, ~8-13 k updates = 16-27 k rows = 32-53 k env frames per seed. ROWS (64,000 rows,
# 128 k frames) is a cap that only a faster GPU reaches; otherwise the stage's limit ends
# the run and the log points reached so far (every EVAL_EVERY = 2,000 rows, 4,000 frames)
# are the curve. More seeds cost FLOPs, not latency: SEEDS="0 1 ... 7" trades env steps
# for seeds.
#
# OUT receives at most 9 files: gpu_check.json, gpu_check_log.txt
# (every stage's output), run_config.json, run_records.jsonl, run_episodes.jsonl,
# data_parallel.json, replay_memory.json and the 2 bench JSONs. Everything else stays in WORK (a temporary
# folder).
set -u
cd "$(dirname "$0")/.."
OUT=${1:-results/bench/gpu_$(date -u +%Y%m%d)}
PY=${PYTHON:-python3}
SMOKE=${SMOKE:-0}
SCORES=${SCORES:-}
BUDGET=${BUDGET:-540}
BENCH_S=${BENCH_S:-$([ "$SMOKE" = 1 ] && echo 0 || echo 100)}  # the bench stage's limit; 0: no benches
DATA_S=${DATA_S:-$([ "$SMOKE" = 1 ] && echo 0 || echo 90)}  # the data stage's limit; 0: skipped
REPLAY_S=${REPLAY_S:-$([ "$SMOKE" = 1 ] && echo 0 || echo 90)}  # the replay stage's limit; 0: skipped
TRAIN_S=${TRAIN_S:-290}    # the train stage's limit, start-up and compile included
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}
if [ "$SMOKE" = 1 ]; then
    SEEDS=${SEEDS:-0 1}; ROWS=${ROWS:-160}; EVAL_EVERY=${EVAL_EVERY:-80}
    # tiny network, 2 envs, episodes cut at 40 steps so that training episodes end;
    # batches of 4 x 16 rows at train ratio 32 (the reference's updates per row at a
    # sixteenth of the work, as the tests' small runs)
    train_args=(--tiny --num-envs 2 --eval-episodes 2 --set wrapper.length=40
                --set jax.compute_dtype=float32 --set batch_size=4 --set batch_length=17
                --set run.train_ratio=32)
    bench_sizes=(tiny tiny); bench_dtypes=(float32 bfloat16)
    data_args=(--tiny --rounds 1 --stretch 1)
    data_env=(XLA_FLAGS="${XLA_FLAGS:-} --xla_force_host_platform_device_count=2")
    replay_args=(--size tiny --repeats 1 --ticks 2)
else
    SEEDS=${SEEDS:-0 1 2 3}; ROWS=${ROWS:-64000}; EVAL_EVERY=${EVAL_EVERY:-2000}
    train_args=(--eval-episodes 10 --set jax.compute_dtype=bfloat16)
    bench_sizes=(1m 12m); bench_dtypes=(float32 bfloat16)
    data_args=(--size 1m); data_env=()
    replay_args=(--size 1m --repeats 3 --ticks 10)
fi
mkdir -p "$OUT" "$WORK/bench"
LOG="$OUT/gpu_check_log.txt"
START=$(date +%s)
git rev-parse HEAD > "$WORK/git_commit.txt" 2>/dev/null || true
echo "gpu_check: OUT $OUT, WORK $WORK, budget $BUDGET s, smoke $SMOKE" | tee -a "$LOG"

left() { echo $(( BUDGET - ($(date +%s) - START) )); }

assemble() {
    local flags=(--work "$WORK" --out "$OUT/gpu_check.json" --scores "$SCORES"
                 --budget "$BUDGET")
    [ "$SMOKE" = 1 ] && flags+=(--smoke)
    "$PY" benchmarks/gpu_check.py assemble "${flags[@]}" >> "$LOG" 2>&1 \
        || echo "gpu_check: assembling the JSON failed (see $LOG)" >&2
}

# stage NAME LIMIT CMD...: CMD under `timeout` for LIMIT seconds or what is left of the
# budget (keeping RESERVE for the last assembly), SIGKILL 10 s after SIGTERM within that
# (a training run stops only at its next log point on SIGTERM); its output in
# WORK/NAME.log and LOG; one line in WORK/stages.jsonl; then the JSON rewritten.
RESERVE=15
stage() {
    local name=$1 limit=$2 rc status t0 secs
    shift 2
    local avail=$(( $(left) - RESERVE ))
    (( limit > avail )) && limit=$avail
    if (( limit < 20 )); then
        status=skipped; rc=0; secs=0
        echo "gpu_check: $name skipped (${limit} s left)" | tee -a "$LOG"
    else
        echo "gpu_check: $name, limit $limit s: $*" | tee -a "$LOG"
        t0=$(date +%s)
        timeout --kill-after=10 $(( limit - 10 )) "$@" > "$WORK/$name.log" 2>&1
        rc=$?
        secs=$(( $(date +%s) - t0 ))
        cat "$WORK/$name.log" >> "$LOG"
        case $rc in 0) status=ok ;; 124|137) status=timeout ;; *) status=failed ;; esac
        echo "gpu_check: $name $status (rc $rc) after $secs s" | tee -a "$LOG"
    fi
    printf '{"stage": "%s", "status": "%s", "rc": %d, "seconds": %d, "limit_s": %d, "log": "%s"}\n' \
        "$name" "$status" "$rc" "$secs" "$limit" "$WORK/$name.log" >> "$WORK/stages.jsonl"
    assemble
}

skip() {  # skip NAME REASON
    echo "gpu_check: $1 skipped ($2)" | tee -a "$LOG"
    printf '{"stage": "%s", "status": "skipped", "reason": "%s"}\n' "$1" "$2" \
        >> "$WORK/stages.jsonl"
    assemble
}

keep() {  # keep SRC NAME: copy a file into OUT if it exists
    if [ -f "$1" ]; then cp "$1" "$OUT/$2"; fi
}

# bench_stage NAME LIMIT I: benchmarks/gpu.sh for the I-th size and dtype into WORK/bench,
# gpu.sh's own per-configuration limit a little inside the stage's.
bench_stage() {
    local name=$1 limit=$2 size=${bench_sizes[$3]} dtype=${bench_dtypes[$3]}
    if (( BENCH_S <= 0 )); then skip "$name" "BENCH_S=0"; return; fi
    stage "$name" "$limit" env SMOKE="$SMOKE" SIZES="$size" DTYPES="$dtype" \
        LIMIT=$(( limit - 15 )) PYTHON="$PY" bash benchmarks/gpu.sh "$WORK/bench"
    keep "$WORK/bench/bench_${size}_${dtype}.json" "bench_${size}_${dtype}.json"
}

# data_stage: benchmarks/data_parallel.py over 1, 2, 4, ... devices into WORK; its own
# --limit a little inside the stage's, so that it stops a worker and still writes its JSON.
data_stage() {
    if (( DATA_S <= 0 )); then skip data "DATA_S=0"; return; fi
    local limit=$DATA_S avail=$(( $(left) - RESERVE ))
    (( limit > avail )) && limit=$avail
    stage data "$limit" env PYTHONUNBUFFERED=1 ${data_env[@]+"${data_env[@]}"} \
        "$PY" benchmarks/data_parallel.py "${data_args[@]}" --limit $(( limit - 15 )) \
        --out "$WORK/data_parallel.json"
    keep "$WORK/data_parallel.json" data_parallel.json
}

# replay_stage: benchmarks/replay_memory.py, run.replay_memory host against device.
replay_stage() {
    if (( REPLAY_S <= 0 )); then skip replay "REPLAY_S=0"; return; fi
    stage replay "$REPLAY_S" env PYTHONUNBUFFERED=1 "$PY" benchmarks/replay_memory.py \
        "${replay_args[@]}" --out "$WORK/replay_memory.json"
    keep "$WORK/replay_memory.json" replay_memory.json
}

stage devices 120 "$PY" benchmarks/gpu_check.py devices --out "$WORK/devices.json"
if [ "$SMOKE" != 1 ] && ! grep -q '"backend": "gpu"' "$WORK/devices.json" 2>/dev/null; then
    echo "gpu_check: no GPU backend (see $OUT/gpu_check.json); stopping" >&2
    exit 2
fi
cp "$WORK/devices.json" "$WORK/bench/devices.json"  # gpu.sh keeps it: no second probe

bench_stage bench "$BENCH_S" 0
data_stage

if grep -q '"playground_import_error": null' "$WORK/devices.json"; then
    read -r -a seeds <<< "$SEEDS"
    train=("$PY" -m dreamerjax.tools.cli train --env playground_CartpoleBalance
           --configs dmc_proprio "${train_args[@]}" --seeds "${seeds[@]}" --steps "$ROWS"
           --eval-every "$EVAL_EVERY" --checkpoint-every 0 --report-every 0
           --set logger.outputs=jsonl --no-precompile --no-compile-cache --out "$WORK/run")
    echo "${train[*]}" > "$WORK/train_command.txt"
    stage train "$TRAIN_S" env PYTHONUNBUFFERED=1 "${train[@]}"
    keep "$WORK/run/config.json" run_config.json
    keep "$WORK/run/records.jsonl" run_records.jsonl
    keep "$WORK/run/episodes.jsonl" run_episodes.jsonl
else
    skip train "mujoco_playground does not import (devices.json: playground_import_error)"
fi

replay_stage
bench_stage bench2 $(( $(left) - RESERVE )) 1
echo "gpu_check: done in $(( $(date +%s) - START )) s; $OUT/gpu_check.json" | tee -a "$LOG"
