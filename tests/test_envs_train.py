"""Tiny training runs of the compiled suites: two seeds vmapped, a few hundred rows, the
records written with the schedule's update counts (real packages; skipped without the
extra). Slow tier: each compiles a whole training chunk around its env."""

import importlib.util

import numpy as np
import pytest
from _runs import small_config

from dreamerjax.run import driver, records

RUNS = [
    # MinAtar's 10 x 10 images take a CNN geometry of their own (the check suggests it).
    ("gymnax_Breakout-MinAtar", "gymnax", dict(cnn_mults=(1, 2), cnn_minres=5)),
    ("craftax_Craftax-Classic-Symbolic-v1", "craftax", {}),
    ("craftax_Craftax-Classic-Pixels-v1", "craftax", {}),
    ("playground_CartpoleBalance", "mujoco_playground", {}),
    ("brax_ant", "brax", {}),
]


@pytest.mark.slow
@pytest.mark.parametrize("env_id, package, geometry", RUNS, ids=[r[0] for r in RUNS])
def test_tiny_two_seed_run_writes_records(env_id, package, geometry, tmp_path):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} not installed")
    # The shared small run (tests/_runs.py; 8 envs x 30 ticks, log points at rows 80, 160,
    # 240); episodes cut at 30 steps so that some end in every suite.
    cfg = small_config(env_id, episode_limit=30, **geometry)
    driver.train(cfg, (0, 1), str(tmp_path), progress=False, compile_cache=False)
    recs = records.read_records(tmp_path)
    assert [(r["seed"], r["rows"]) for r in recs] == [
        (0, 80), (1, 80), (0, 160), (1, 160), (0, 240), (1, 240)]
    assert recs[-1]["updates"] > 0 and recs[-1]["updates"] == recs[-2]["updates"]
    for r in recs:
        assert np.isfinite(r["eval_mean"])
    eps = records.read_episodes(tmp_path)
    assert {e["seed"] for e in eps} == {0, 1}
    assert all(1 <= e["length"] <= 30 for e in eps)
