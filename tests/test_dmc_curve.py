"""benchmarks/dmc_curve.sh: a DMC curve trained in pieces. Its SMOKE mode on this CPU, a
tiny Playground run: the first call trains a new run to ROWS and copies its records, the
second (a larger ROWS) resumes it and, done, exports each seed's policy and plays it; with
a scores file in the reference's format (synthetic, never the reference's own) each call
compares and plots the curve so far."""

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _xla import QUICK_CODEGEN
from test_gpu_script import synthetic

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "dmc_curve.sh"


def _call(run, out, tmp_path, **env):
    env = os.environ | {"PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "SMOKE": "1",
                        "SEEDS": "0 1", "EVAL_EVERY": "48", "EVAL_EPISODES": "1",
                        "XLA_FLAGS": QUICK_CODEGEN,
                        "XDG_CACHE_HOME": str(tmp_path / "cache"), **env}
    return subprocess.run(["bash", str(SCRIPT), str(run), str(out)], capture_output=True,
                          text=True, env=env, check=False, timeout=900)


def _rows(path):
    with gzip.open(path, "rt") as f:
        return sorted({json.loads(line)["rows"] for line in f if line.strip()})


def test_a_curve_in_two_calls_resumes_and_compares(tmp_path):
    if importlib.util.find_spec("mujoco_playground") is None:
        pytest.skip("mujoco_playground not installed")
    run, out = tmp_path / "run", tmp_path / "out"
    scores = synthetic(tmp_path / "s.json.gz")
    first = _call(run, out, tmp_path, ROWS="48", SCORES=scores, EXPORT="0")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert "at 48 of 48 rows" in first.stdout
    assert _rows(out / "records.jsonl.gz") == [48]
    second = _call(run, out, tmp_path, ROWS="96", SCORES=scores, POLICY_EPISODES="1")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    assert "at 96 of 96 rows" in second.stdout
    assert _rows(out / "records.jsonl.gz") == [48, 96]  # the run went on, not anew
    config = json.loads((out / "config.json").read_text())
    assert config["run"]["env"] == "playground_CartpoleBalance" and config["seeds"] == [0, 1]
    compare = json.loads((out / "compare.json").read_text())
    assert compare["task"] == "dmc_cartpole_balance"
    assert [p["env_steps"] for p in compare["eval"]["points"]] == [96, 192]
    assert (out / "curve.png").stat().st_size > 0
    # done: each seed's policy exported (EXPORT=0 kept the first call from it) and played
    # from the file itself
    for seed in (0, 1):
        assert (out / f"policy_seed{seed}.npz").stat().st_size > 0
        played = json.loads((out / f"policy_seed{seed}.eval.json").read_text())
        assert played["seed"] == seed and len(played["returns"]) == 1


def test_a_call_cut_by_its_limit_asks_for_another(tmp_path):
    """LIMIT ends the call (here within start-up, before any log point): exit 3, not done,
    and no records to copy."""
    run, out = tmp_path / "run", tmp_path / "out"
    proc = _call(run, out, tmp_path, ROWS="96", LIMIT="1")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "at 0 of 96 rows (train exited 124)" in proc.stdout
    assert not (out / "records.jsonl.gz").exists()


@pytest.mark.slow
def test_dm_controls_own_swingup_with_the_dtype_reference_and_extra_knobs(tmp_path):
    """TASK=dmc_cartpole_swingup: dm_control's own task through the host path, its
    workers in processes (EXTRA=--driver-parallel), bfloat16 compute and the reference
    version named, as the accelerator runs set them; MUJOCO_GL left unset, so the script's
    `disable` applies (the preset renders nothing)."""
    if importlib.util.find_spec("dm_control") is None:
        pytest.skip("dm_control not installed")
    run, out = tmp_path / "run", tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(run), str(out)], capture_output=True, text=True,
        check=False, timeout=900,
        env=env | {"PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "SMOKE": "1",
                   "SEEDS": "0", "ROWS": "48", "EVAL_EVERY": "48", "EVAL_EPISODES": "1",
                   "TASK": "dmc_cartpole_swingup", "DTYPE": "bfloat16",
                   "REFERENCE": "29eb964", "EXTRA": "--driver-parallel",
                   "XLA_FLAGS": QUICK_CODEGEN, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "at 48 of 48 rows" in proc.stdout
    assert _rows(out / "records.jsonl.gz") == [48]
    config = json.loads((out / "config.json").read_text())
    assert config["run"]["env"] == "dmc_cartpole_swingup"
    assert config["run"]["driver_parallel"] is True
    assert config["agent"]["compute_dtype"] == "bfloat16"
    assert config["agent"]["reference"] == "29eb964"
