#!/usr/bin/env bash
# The update bench on a GPU, in one prepared run: `dreamerjax bench` of the 1m and 12m
# presets, float32 and bfloat16 compute, 1 and 16 vmapped seeds (seed_loop auto = vmap off
# a CPU), each configuration in its own process under its own time limit, so one that
# hangs or runs out of memory costs only its slot. Every JSON lands in OUT as it finishes.
#
#   benchmarks/gpu.sh [OUT]              # default OUT: results/bench/gpu_<date>
#   LIMIT=140 UPDATES=20 benchmarks/gpu.sh
#   SMOKE=1 benchmarks/gpu.sh OUT   # anywhere: tiny network, 1 and 2 seeds, 2 updates
#   SIZES=12m DTYPES=bfloat16 benchmarks/gpu.sh   # a part of the matrix (gpu_check.sh does)
#
# A devices.json already in OUT is kept (gpu_check.sh writes it first), saving the probe.
#
# Needs jax with a GPU backend installed (`pip install -U "jax[cuda12]"`); the script
# records jax.devices() first and stops there if there is no GPU (unless SMOKE=1).
set -u
cd "$(dirname "$0")/.."
OUT=${1:-results/bench/gpu_$(date -u +%Y%m%d)}
LIMIT=${LIMIT:-140}        # seconds per configuration: 4 of them fit a 10-minute call
UPDATES=${UPDATES:-20}
PY=${PYTHON:-python}
mkdir -p "$OUT"
read -r -a dtypes <<< "${DTYPES:-float32 bfloat16}"
if [ "${SMOKE:-0}" = 1 ]; then
    sizes=(tiny); seeds=(1 2); UPDATES=2
else
    read -r -a sizes <<< "${SIZES:-1m 12m}"; seeds=(1 16)
fi
if [ ! -s "$OUT/devices.json" ]; then
    "$PY" - > "$OUT/devices.json" <<'PY' || exit 1
import json, jax
devs = jax.devices()
print(json.dumps({"backend": jax.default_backend(), "jax": jax.__version__,
                  "devices": [str(d) for d in devs],
                  "kinds": sorted({getattr(d, "device_kind", "") for d in devs})}))
PY
fi
cat "$OUT/devices.json"
if [ "${SMOKE:-0}" != 1 ] && ! grep -q '"backend": "gpu"' "$OUT/devices.json"; then
    echo "gpu.sh: no GPU backend (see $OUT/devices.json); nothing benched" >&2
    exit 2
fi
status=0
for size in "${sizes[@]}"; do
    for dtype in "${dtypes[@]}"; do
        name="bench_${size}_${dtype}"
        if [ "$size" = tiny ]; then which=(--tiny); else which=(--size "$size"); fi
        start=$(date +%s)
        timeout --kill-after=10 "$LIMIT" "$PY" -m dreamerjax.tools.cli bench --json "${which[@]}" \
            --seeds "${seeds[@]}" --updates "$UPDATES" --set "jax.compute_dtype=$dtype" \
            > "$OUT/$name.json" 2> "$OUT/$name.err"
        rc=$?
        echo "$name: rc $rc, $(( $(date +%s) - start )) s"
        if [ $rc -ne 0 ]; then status=1; else rm -f "$OUT/$name.err"; fi
    done
done
exit $status
