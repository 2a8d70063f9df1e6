"""Tiny training runs of the compiled suites with each reference version (29eb964 and
HEAD e3f0224): two seeds vmapped, a few hundred rows, the records written with the
schedule's update counts (real packages; skipped without the extra). Slow tier: each
compiles a whole training chunk around its env."""

import importlib.util

import numpy as np
import pytest
from _runs import at_head, small_config

from dreamerjax.config.defaults import HEAD_REF, REF_29EB964
from dreamerjax.run import driver, records

# (env, package, 29eb964's CNN geometry, HEAD's CNN stages): MinAtar's 10 x 10 images take
# a geometry of their own in each version (each version's check suggests it).
RUNS = [
    ("gymnax_Breakout-MinAtar", "gymnax", dict(cnn_mults=(1, 2), cnn_minres=5), (4,)),
    ("craftax_Craftax-Classic-Symbolic-v1", "craftax", {}, None),
    ("craftax_Craftax-Classic-Pixels-v1", "craftax", {}, None),
    ("playground_CartpoleBalance", "mujoco_playground", {}, None),
    ("brax_ant", "brax", {}, None),
]


@pytest.mark.slow
@pytest.mark.parametrize("reference", [REF_29EB964, HEAD_REF])
@pytest.mark.parametrize("env_id, package, geometry, head_mults", RUNS,
                         ids=[r[0] for r in RUNS])
def test_tiny_two_seed_run_writes_records(env_id, package, geometry, head_mults, reference,
                                          tmp_path):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} not installed")
    # The shared small run (tests/_runs.py; 8 envs x 30 ticks, log points at rows 80, 160,
    # 240); episodes cut at 30 steps so that some end in every suite. HEAD's gate opens
    # later (4 x 16 items: row 192), still before the last log point.
    cfg = small_config(env_id, episode_limit=30, **geometry)
    if reference == HEAD_REF:
        cfg = at_head(cfg, head_mults)
    driver.train(cfg, (0, 1), str(tmp_path), progress=False)
    recs = records.read_records(tmp_path)
    assert [(r["seed"], r["rows"]) for r in recs] == [
        (0, 80), (1, 80), (0, 160), (1, 160), (0, 240), (1, 240)]
    assert recs[-1]["updates"] > 0 and recs[-1]["updates"] == recs[-2]["updates"]
    for r in recs:
        assert np.isfinite(r["eval_mean"])
    eps = records.read_episodes(tmp_path)
    assert {e["seed"] for e in eps} == {0, 1}
    assert all(1 <= e["length"] <= 30 for e in eps)
