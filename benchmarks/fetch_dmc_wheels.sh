#!/usr/bin/env bash
# The wheels that install dm_control's Control Suite on a Linux x86_64 machine with no
# internet, for a given Python: dm_control and mujoco slimmed (benchmarks/slim_dm_control.py)
# and every wheel of its dependency closure except those the machine already has (SKIP:
# numpy and scipy, which JAX brings). Run it where PyPI is reachable; carry DIR over and
#
#   pip install --no-index --find-links DIR dm-control==1.0.50
#
# there. Prints each wheel's size and the total; exits 1 when the total is over
# BUDGET_MIB (a machine that takes a working tree of limited size has room for that much).
#
#   bash benchmarks/fetch_dmc_wheels.sh wheels/dmc
#   PYVER=3.12 BUDGET_MIB=30 bash benchmarks/fetch_dmc_wheels.sh wheels/dmc
#
# Knobs (environment): PYVER (3.11, the target's python), GLIBC (2.28: the newest manylinux
# wheels taken, manylinux_2_28_x86_64, and every older one; Ubuntu 22.04 has 2.35), DM_CONTROL (1.0.50: the newest release
# before dm_control asked for mujoco 4, which dreamerjax's dmc extra excludes), MUJOCO
# ("mujoco>=3.17,<4"), SKIP ("numpy scipy"), BUDGET_MIB (40), PYTHON (python3, with pip;
# runs pip and the slimming).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: fetch_dmc_wheels.sh DIR}
PY=${PYTHON:-python3}
PYVER=${PYVER:-3.11}
GLIBC=${GLIBC:-2.28}
DM_CONTROL=${DM_CONTROL:-1.0.50}
MUJOCO=${MUJOCO:-mujoco>=3.17,<4}
BUDGET_MIB=${BUDGET_MIB:-40}
read -r -a skip <<< "${SKIP:-numpy scipy}"

# pip matches --platform tags exactly: name every manylinux tag up to GLIBC.
platforms=(--platform manylinux1_x86_64 --platform manylinux2010_x86_64
           --platform manylinux2014_x86_64)
for minor in $(seq 5 "${GLIBC#2.}"); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# One resolve for the target's tags, so the closure is the one pip would install there
# (numpy and scipy come too and are left out below: they take part in the resolve).
"$PY" -m pip download --quiet --dest "$stage" --only-binary=:all: --implementation cp \
    --python-version "$PYVER" "${platforms[@]}" \
    "dm-control==$DM_CONTROL" "$MUJOCO"
mkdir -p "$DIR"
for whl in "$stage"/*.whl; do
    base=$(basename "$whl")
    # A wheel's file name starts with its distribution name, '-' written as '_'.
    name=$(echo "${base%%-*}" | tr '[:upper:]' '[:lower:]')
    for s in "${skip[@]}"; do
        if [ "$name" = "$(echo "$s" | tr '[:upper:]-' '[:lower:]_')" ]; then continue 2; fi
    done
    if [ "$name" = dm_control ] || [ "$name" = mujoco ]; then
        "$PY" benchmarks/slim_dm_control.py "$whl" -o "$DIR" >/dev/null
    else
        cp "$whl" "$DIR/"
    fi
    echo "$base"
done > "$stage/kept.txt"
total=0
while read -r base; do
    size=$(stat -c %s "$DIR/$base")
    total=$((total + size))
    printf '%10d  %s\n' "$size" "$base"
done < "$stage/kept.txt"
budget=$((BUDGET_MIB * 1024 * 1024))
printf '%10d  total in %s (%s MiB budget)\n' "$total" "$DIR" "$BUDGET_MIB"
if (( total > budget )); then
    echo "fetch_dmc_wheels: $total bytes is over BUDGET_MIB=$BUDGET_MIB" >&2
    exit 1
fi
