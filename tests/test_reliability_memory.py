"""Memory before allocating: the replay's and the agent's bytes equal what the state
holds, and a run whose replay, or replay and agents, cannot fit is refused before anything
compiles, with the figures and the machine's free memory."""

from __future__ import annotations

import dataclasses
import math
import sys

import jax
import pytest
from _runs import SMALL_ARGV, small_argv, small_config

from dreamerjax.run import loop, memory
from dreamerjax.run import setup as setup_lib
from dreamerjax.tools import cli


def _setup():
    """The tests' small run (tests/_runs.py): 8 envs, a replay ring of 64 rows per env."""
    return setup_lib.make_setup(small_config())


def test_replay_bytes_equal_the_replay_the_state_holds():
    setup = _setup()
    state = jax.eval_shape(lambda k: loop.init_seed(setup, k), jax.random.PRNGKey(0))
    data = jax.tree.leaves(state.replay.data)
    held = sum(math.prod(x.shape) * x.dtype.itemsize for x in data)
    assert memory.replay_bytes(setup, 1) == held == 8 * 64 * memory.row_bytes(setup)
    assert memory.replay_bytes(setup, 3) == 3 * held
    assert memory.describe(setup, 3).startswith("replay: 3 seeds x 8 envs x 64 rows x ")


def test_available_is_a_positive_figure():
    have, where = memory.available()
    assert have > 0 and where
    assert 0 < memory.host_available()
    assert memory.fmt(1536) == "1.5 KiB" and memory.fmt(12) == "12 B"


def _too_big_capacity(setup) -> int:
    """Rows per env whose replay (one seed) is twice what the machine has free."""
    return 2 * memory.available()[0] // (setup.run.num_envs * memory.row_bytes(setup)) + 1


def test_driver_refuses_before_compiling(tmp_path, monkeypatch):
    from dreamerjax.run import driver

    setup = _setup()
    config = small_config(replay_capacity=_too_big_capacity(setup))

    def no_trainer(*args, **kwargs):
        raise AssertionError("a Trainer was built (compiling) for a replay that cannot fit")

    monkeypatch.setattr(driver, "make_trainer", no_trainer)
    with pytest.raises(MemoryError) as err:
        driver.train(config, (0,), str(tmp_path / "run"), progress=False)
    message = str(err.value)
    assert "does not fit" in message
    assert "available host memory" in message or "free on" in message
    assert "GiB" in message or "TiB" in message
    assert not (tmp_path / "run").exists()


def test_the_replay_is_held_by_every_device_it_splits_over(monkeypatch):
    """--devices x --data-devices: a seed's replay is split over its data devices, so the
    free memory of all of them counts (on accelerators each device reports its own; the
    CPU backend's mock devices share the host's, whatever the count)."""
    asked = []

    def free(devices=1):
        asked.append(devices)
        return 1 << 60, "free on the devices"

    monkeypatch.setattr(memory, "available", free)
    config = small_config()
    config = dataclasses.replace(
        config, run=dataclasses.replace(config.run, train_devices=(0, 1, 2, 3)))
    memory.check_replay(setup_lib.make_setup(config), 2, devices=2)
    memory.check_replay(_setup(), 2, devices=2)
    assert asked == [8, 2]


def test_a_process_checks_its_own_share_against_its_own_devices(monkeypatch):
    """Over several processes each holds the replay rows of its own devices' envs: its
    share (local of the mesh's devices) is checked against the memory of those."""
    setup = _setup()
    config = dataclasses.replace(setup.config, run=dataclasses.replace(
        setup.run, train_devices=(0, 1)))
    whole = dataclasses.replace(setup, config=config)
    need = memory.replay_bytes(whole, 1)
    asked = []

    def free(devices=1):
        asked.append(devices)
        return need // 2 + memory.agent_bytes(whole) + 1, "free"  # its half, its agent

    monkeypatch.setattr(memory, "available", free)
    assert memory.check_replay(whole, 1, 1, local=1) == need  # its half on its 1 of 2
    with pytest.raises(MemoryError, match=r"this process's 1 of 2 devices"):
        memory.check_replay(whole, 2, 1, local=1)  # 2 seeds: its half is twice as big
    with pytest.raises(MemoryError):
        memory.check_replay(whole, 1, 1)  # one process holds all of it
    assert asked == [1, 1, 2]


def test_cli_refuses_with_one_line_before_the_driver(tmp_path, monkeypatch, capsys):
    rows = _too_big_capacity(_setup())
    monkeypatch.setitem(sys.modules, "dreamerjax.run.driver", None)
    code = cli.main(["train", "--out", str(tmp_path / "run"), *small_argv(),
                     "--set", f"run.replay_capacity={rows}"])  # the last --set wins
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and err.startswith("dreamerjax train: error: replay: 1 seeds")
    assert f"x {rows:,} rows x" in err and "does not fit" in err
    assert not (tmp_path / "run").exists()


def test_agent_bytes_equal_the_agent_state_a_seed_holds():
    setup = _setup()
    state = jax.eval_shape(lambda k: loop.init_seed(setup, k), jax.random.PRNGKey(0))
    held = sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(state.agent))
    assert memory.agent_bytes(setup) == held > 0


def test_agent_states_that_cannot_fit_beside_the_replay_are_refused_in_one_line(
        tmp_path, monkeypatch, capsys):
    """A run whose replay fits but whose replay and agent states together do not (a large
    model with many seeds) is refused before the driver, naming --seeds and --size, and
    creates nothing."""
    setup = _setup()
    fits = memory.replay_bytes(setup, 2) + 2 * memory.agent_bytes(setup) - 1
    monkeypatch.setattr(memory, "available", lambda devices=1: (fits, "free on 1 tpu device(s)"))
    monkeypatch.setattr(memory, "host_available", lambda: fits)
    assert memory.check_replay(setup, 1) == memory.replay_bytes(setup, 1)  # one seed fits
    monkeypatch.setitem(sys.modules, "dreamerjax.run.driver", None)
    code = cli.main(["train", "--out", str(tmp_path / "run"), *small_argv(),
                     "--seeds", "0", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert err.startswith("dreamerjax train: error: agent state: 2 seeds x ")
    assert "beside the" in err and "free on 1 tpu device(s)" in err
    assert "--seeds" in err and "--size" in err
    assert not (tmp_path / "run").exists()


def test_info_prints_the_replay(capsys):
    assert cli.main(["info", "--tiny"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("replay: ")]
    assert "per seed" in line
    assert "available host memory" in line or "free on" in line


def test_info_names_the_accelerator_and_the_seeds_whose_replays_fit(capsys, monkeypatch):
    # the machine's free memory moves between two reads: info's and this test's, held fixed
    have = 37 * 2**30 + 12345
    monkeypatch.setattr(memory, "host_available", lambda: have)
    assert cli.main(["info", "--tiny"]) == 0
    out = capsys.readouterr().out.splitlines()
    (fit,) = [x for x in out if x.startswith("Seeds whose replays fit there: ")]
    setup = setup_lib.make_setup(cli.resolve_args(cli.parse(["info", "--tiny"]))[0])
    assert memory.available()[0] == have or jax.default_backend() != "cpu"
    assert int(fit.split(": ")[1].replace(",", "")) == (
        memory.available()[0] // memory.replay_bytes(setup, 1))
    (head,) = [x for x in out if x.startswith("Accelerator: ")]
    assert head.startswith(f"Accelerator: {jax.default_backend()} (jax {jax.__version__}), "
                           f"{jax.device_count()} device(s)")
    kind = jax.devices()[0].device_kind
    assert any(x.startswith(f"  {jax.device_count()} x {kind} ") for x in out)


@pytest.mark.parametrize("argv", [["info", "--tiny"], ["train", *SMALL_ARGV, "--out", "run"]],
                         ids=["info", "train"])
def test_a_missing_accelerator_asked_for_says_what_to_change(tmp_path, argv):
    """JAX_PLATFORMS=tpu (a TPU-only request) on a machine JAX finds no TPU on: one line
    naming the variable and the fixes, exit 2, and no run directory made."""
    import os
    import subprocess

    if jax.default_backend() == "tpu":
        pytest.skip("this machine has a TPU")
    env = {**os.environ, "JAX_PLATFORMS": "tpu"}
    proc = subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", *argv],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err.count("\n") == 0 and err.startswith(
        f"dreamerjax {argv[0]}: error: JAX_PLATFORMS=tpu"), err
    assert "JAX_PLATFORMS=cpu" in err and "pip install -e '.[tpu]'" in err
    assert not (tmp_path / "run").exists()
