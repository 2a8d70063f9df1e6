"""The run's plan (run/plan.py): made once per run, the config checked once, every entry
taking it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from _runs import small_config

import dreamerjax
from dreamerjax import config as config_pkg
from dreamerjax.config.keys import ConfigError
from dreamerjax.run import plan as plan_lib

CONFIG_DIR = Path(config_pkg.__file__).resolve().parent


def _validations(fn) -> list[str]:
    """Run fn and return, for each call of a function named `validate` defined under
    dreamerjax/config, its file (a profiler sees every call, whoever makes it)."""
    calls: list[str] = []

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_name == "validate" and \
                Path(code.co_filename).resolve().parent == CONFIG_DIR:
            calls.append(code.co_filename)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return calls


def test_a_library_train_validates_its_config_once(tmp_path):
    config = small_config(steps=80)  # one log point: the whole path from train to a chunk
    out = tmp_path / "run"
    result = []
    calls = _validations(lambda: result.append(dreamerjax.train(
        config, (0,), str(out), progress=False, report=False)))
    assert len(result[0].records) == 1
    assert len(calls) == 1, calls


def test_the_plan_validates_once_and_holds_what_the_run_decides():
    config = small_config()
    made = []
    calls = _validations(lambda: made.append(plan_lib.make_plan(config, (0, 1))))
    assert len(calls) == 1, calls
    plan = made[0]
    assert plan.config is config and plan.seeds == (0, 1) and plan.devices == 1
    assert not plan.host and plan.setup.config.run.seed_loop == plan.seed_loop
    assert plan.seed_loop in ("vmap", "map", "threads") and plan.mesh is None
    assert plan.data == plan.fsdp == 1
    assert plan.replay_bytes > 0 and plan.setup.capacity == 64


def test_bad_seeds_and_devices_are_refused_by_the_plan():
    with pytest.raises(ConfigError, match=r"seeds: must be unique"):
        plan_lib.make_plan(small_config(), (0, 0))
    with pytest.raises(ValueError, match="--devices 4 needs 4 devices but only"):
        plan_lib.make_plan(small_config(), (0, 1, 2, 3), devices=4)


def test_a_head_config_over_processes_is_the_whole_run_of_each_processs_part():
    """At e3f0224 a config over P processes is each process's (HEAD's): the plan's whole
    run has P times its envs, batch, train devices and rows, so each data device keeps
    the same envs, replay ring, part of the batch and updates per tick; 29eb964's config
    stays the whole run's."""
    from _runs import at_head

    from dreamerjax.run import loop
    from dreamerjax.run import setup as setup_lib

    per = at_head(small_config(steps=320, num_envs=4, batch_size=2, eval_every=40,
                               replay_capacity=0, replay_size=100))
    whole = plan_lib.processes_config(per, 2)
    run, mine = whole.run, per.run
    assert (run.num_envs, run.batch_size, run.train_devices) == (8, 4, (0, 1))
    assert (run.steps, run.eval_every, run.replay_size) == (640, 80, 200)
    assert (whole.agent, whole.env) == (per.agent, per.env)
    assert plan_lib.processes_config(per, 1) is per
    old = small_config()
    assert plan_lib.processes_config(old, 2) is old  # 29eb964: the whole run's already

    a, b = setup_lib.make_setup(per), setup_lib.make_setup(whole)
    assert (b.capacity, b.ticks_per_log) == (a.capacity, a.ticks_per_log) == (25, 10)
    assert loop.updates_per_tick(b).tolist() == loop.updates_per_tick(a).tolist()
    assert loop.shard_batch_size(b) == loop.shard_batch_size(a) == mine.batch_size
