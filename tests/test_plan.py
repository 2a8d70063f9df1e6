"""The run's plan (run/plan.py): made once per run, the config checked once, every entry
taking it."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from _counting import plan_calls
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


# ----------------------------------------------------------------------------- per entry point
# Each entry point (the command line's train, info, eval and export; the library's train
# and load_policy; the precompile child in its own process; `dreamerjax bench`, counted in
# test_bench.py) makes one plan: one validate of the run's config and one make_setup.
# Counted by wrapping the real functions (tests/_counting.py).


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """`dreamerjax train` of the small run (one seed, three log points, checkpoints at
    the last two): its counts, and the run directory that eval and export read."""
    from _runs import small_argv

    from dreamerjax.tools import cli

    out = tmp_path_factory.mktemp("plan") / "run"
    argv = ["train", *small_argv(), "--seeds", "0", "--out", str(out), "--no-precompile"]
    counts = plan_calls(lambda: cli.main(argv))
    assert counts[2] == 0
    return out, counts[:2]


def test_the_command_lines_train_makes_one_plan(cli_run):
    assert cli_run[1] == (1, 1)


def test_a_library_train_makes_one_plan(tmp_path):
    config = small_config(steps=80)
    counts = plan_calls(lambda: dreamerjax.train(config, (0,), str(tmp_path / "run"),
                                                 progress=False, report=False))
    assert counts[:2] == (1, 1) and len(counts[2].records) == 1


def test_info_makes_one_plan(capsys):
    from dreamerjax.tools import cli

    counts = plan_calls(lambda: cli.main(["info", "--tiny"]))
    assert counts == (1, 1, 0), capsys.readouterr()
    assert "Optimised variables:" in capsys.readouterr().out


def test_eval_makes_one_plan(cli_run, tmp_path, capsys):
    from dreamerjax.tools import cli

    run, _ = cli_run
    argv = ["eval", str(run), "--episodes", "1", "--checkpoint", "all", "--report"]
    counts = plan_calls(lambda: cli.main(argv))
    out = capsys.readouterr().out
    assert counts == (1, 1, 0), out
    assert len([line for line in out.splitlines() if line.startswith("{")]) == 2


def test_export_and_load_policy_make_one_plan(cli_run, tmp_path, capsys):
    from dreamerjax.tools import cli

    run, _ = cli_run
    file = tmp_path / "policy.npz"
    assert plan_calls(lambda: cli.main(["export", str(run), "--out", str(file)])) == (1, 1, 0)
    assert file.is_file()
    checks, setups, policy = plan_calls(lambda: dreamerjax.load_policy(run))
    assert (checks, setups) == (1, 1) and policy.seed == 0


def test_the_preflight_builds_the_env_once_and_checks_devices_and_source_once(monkeypatch):
    """`dreamerjax train`'s preflight and plan: the compiled env built once (by the
    setup), the device counts and run.from_checkpoint's source checked once each."""
    import types

    from _counting import counting

    from dreamerjax import envs
    from dreamerjax.run import transfer
    from dreamerjax.tools import cli

    built = counting(monkeypatch, envs, "make_env")
    counted = counting(monkeypatch, plan_lib, "_check_count")
    sources = counting(monkeypatch, transfer, "check")
    plan = cli.preflight(small_config(), (0,), types.SimpleNamespace(devices=1))
    assert (len(built), len(counted), len(sources)) == (1, 1, 1)
    assert plan.source is None and plan.seeds == (0,)


def test_a_plan_for_other_seeds_keeps_the_checked_config_and_setup():
    """`dreamerjax bench`'s other seed counts (plan.for_seeds): no second check of the
    config nor setup, the decisions made for the new seeds (test_bench.py counts a whole
    bench)."""
    plan = plan_lib.make_plan(small_config(), (0,))
    checks, setups, other = plan_calls(lambda: plan_lib.for_seeds(plan, (0, 1, 2)))
    assert (checks, setups) == (0, 0)
    assert other.setup.spaces is plan.setup.spaces and other.config is plan.config
    assert other.seeds == (0, 1, 2) and other.seed_loop == plan.seed_loop
    assert other.replay_bytes == 3 * plan.replay_bytes
    with pytest.raises(ValueError, match="--devices 2 needs 2 devices"):
        plan_lib.for_seeds(plan, (0, 1), devices=2)


def test_the_precompile_child_makes_one_plan_of_what_the_parent_sends(tmp_path):
    """The child (run/precompile.py, its own process) builds the run's plan from the spec
    the parent sends it: one validate and one make_setup there. Run here as the child's
    main runs it, into this test process's cache (its settings put back after)."""
    import jax

    from dreamerjax.run import precompile

    plan = plan_lib.make_plan(small_config(), (0,))
    spec = precompile.child_spec(plan, False, jax.config.jax_compilation_cache_dir)
    saved = {name: getattr(jax.config, name) for name in (
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes")}
    try:
        checks, setups, out = plan_calls(lambda: precompile.child(json.loads(json.dumps(spec))))
    finally:
        for name, value in saved.items():
            jax.config.update(name, value)
    assert (checks, setups) == (1, 1) and set(out["seconds"]) == {"init", "chunk", "eval"}
