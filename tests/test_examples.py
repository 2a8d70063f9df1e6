"""examples/: each user-facing example runs as a user runs it (`python examples/X.py`), with
the tests' small settings (`--small`: the tiny network, 8 envs, batches of 4 x 16, two log
points), and writes the records of its own environment. docs/environments.md shows them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run_example(name: str, out: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # XDG_CACHE_HOME, XLA_FLAGS: conftest.py's
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / name), "--small",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert f"{out}/records.jsonl" in proc.stdout
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def _check(records: list[dict], out: Path, env_id: str) -> None:
    assert json.loads((out / "config.json").read_text())["run"]["env"] == env_id
    assert sorted((r["seed"], r["rows"]) for r in records) == [
        (0, 80), (0, 160), (1, 80), (1, 160)]
    assert all(0.0 <= r["eval_mean"] <= 1.0 for r in records)  # one reward, at the goal


def test_jax_env_example_trains_a_registered_compiled_env(tmp_path):
    out = tmp_path / "jax"
    _check(_run_example("jax_env.py", out), out, "corridor_walk")


def test_host_env_example_trains_a_registered_gymnasium_env(tmp_path):
    pytest.importorskip("gymnasium")
    out = tmp_path / "host"
    _check(_run_example("host_env.py", out), out, "gym_Corridor-v0")
