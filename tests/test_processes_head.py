"""Runs over several processes as e3f0224 means them (run/plan.py processes_config): each
process trains on its own jax.train_devices with its own envs and replay, the update's
batch is batch_size x processes. Real `dreamerjax train --distributed` processes on
localhost, joined by jax.distributed.

    2 processes x 1 device, --num-envs 4, batch 2, --steps 160, every 40
      = 1 process --data-devices 2, --num-envs 8, batch 4, --steps 320, every 80

(the records count the rows of every process's envs). HEAD's gate (batch 2 x 16 items of
each process's replay) opens at its 96th row, then 1 update per row of its own: 25 and 65
updates at 120 and 160 rows of each process. Devices a process lacks are refused in one
line before anything compiles.
"""

import json
import math
import subprocess
import sys

import pytest
from _runs import SMALL_ARGV, UPDATES
from _xla import free_port, host_devices_env, train_in_processes

HEAD = ["--reference", "e3f0224"]


def _argv(num_envs: int, batch: int, steps: int, every: int) -> list[str]:
    """The small run of tests/_runs.py with its envs, batch and rows replaced."""
    argv = list(SMALL_ARGV)
    argv[argv.index("--num-envs") + 1] = str(num_envs)
    argv[argv.index("--eval-every") + 1] = str(every)
    argv[argv.index("batch_size=4")] = f"batch_size={batch}"
    return [*HEAD, *argv, "--steps", str(steps), "--no-precompile"]


def _records(out):
    with open(out / "records.jsonl") as f:
        return [json.loads(line) for line in f]


def _figures(recs):
    """What must match across layouts: rows, updates and the update's losses."""
    return [(r["rows"], r["updates"],
             *(r["train"].get(k) for k in ("opt_loss", "dyn_loss", "rep_loss")))
            for r in recs]


def _two_processes(tmp_path, tag: str, argv: list[str], devices: int = 1) -> None:
    train_in_processes(argv, [tmp_path / f"{tag}{i}.log" for i in (0, 1)],
                       host_devices_env(devices), 1500)


def _close(a, b):
    assert [x[:2] for x in a] == [x[:2] for x in b]
    assert a[-1][1] > 0 and all(v is not None for v in a[-1][2:])
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x[2:], y[2:], strict=True):
            assert (u is None and v is None) or math.isclose(u, v, rel_tol=1e-3), (x, y)


@pytest.fixture(scope="module")
def two_processes_run(tmp_path_factory):
    """2 processes x 1 device: 4 envs and batch 2 each, 160 rows each (320 in all)."""
    tmp = tmp_path_factory.mktemp("two")
    out = tmp / "run"
    _two_processes(tmp, "fresh", [*_argv(4, 2, 160, 40), "--seeds", "0", "--out", str(out)])
    return out


@pytest.mark.slow
def test_two_processes_train_as_one_process_with_their_devices(tmp_path, two_processes_run):
    recs = _records(two_processes_run)
    config = json.loads((two_processes_run / "config.json").read_text())
    assert (config["run"]["num_envs"], config["run"]["batch_size"]) == (4, 2)  # given
    assert config["run"]["train_devices"] == [0]  # each process's own device

    out = tmp_path / "one"
    subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", "train",
                    *_argv(8, 4, 320, 80), "--data-devices", "2", "--seeds", "0",
                    "--out", str(out)], env=host_devices_env(2), check=True, timeout=1500,
                   capture_output=True)
    one = _records(out)
    assert [(r["rows"], r["updates"]) for r in recs] == [
        (80, 0), (160, 0), (240, 25), (320, 65)]  # every process's rows
    _close(_figures(recs), _figures(one))
    assert [r["eval_returns"] for r in recs] == [r["eval_returns"] for r in one]


@pytest.mark.slow
def test_two_processes_resumed_equal_the_uninterrupted_run(tmp_path, two_processes_run):
    out = tmp_path / "run"
    _two_processes(tmp_path, "first", [*_argv(4, 2, 120, 40), "--seeds", "0", "--out",
                                       str(out)])
    first = _records(out)
    assert [r["rows"] for r in first] == [80, 160, 240]
    _two_processes(tmp_path, "resume", ["--resume", str(out), "--steps", "160",
                                        "--no-precompile"])
    recs = _records(out)
    assert recs[:3] == first  # the resume kept what was written
    _close(_figures(recs), _figures(_records(two_processes_run)))


HOST_RUNS = {  # version -> (argv, records' (rows, updates))
    # each process's 4 envs and batch 2 (HEAD's gate: 25 updates by 120 rows each)
    "e3f0224": (_argv(4, 2, 120, 40), [(80, 0), (160, 0), (240, 25)]),
    # the whole run's 8 envs and batch 4 over both processes' devices (tests/_runs.py)
    "29eb964": ([*SMALL_ARGV, "--steps", "240", "--data-devices", "2", "--no-precompile"],
                [(80, UPDATES[80]), (160, UPDATES[160]), (240, UPDATES[240])]),
    # the same with each process's replay rows in its pinned host memory
    "e3f0224-host-replay": ([*_argv(4, 2, 120, 40), "--run.replay_memory", "host"],
                            [(80, 0), (160, 0), (240, 25)]),
}


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(HOST_RUNS))
def test_two_processes_step_their_own_host_envs(tmp_path, version):
    """Gymnasium's CartPole (host envs) over 2 processes x 1 device: each steps the 4
    envs on its device; process 0 writes one record line per log point. With a host
    replay, each process keeps its own rows in its own host memory."""
    argv, want = HOST_RUNS[version]
    out = tmp_path / "run"
    _two_processes(tmp_path, "gym", [*argv, "--env", "gym_CartPole-v1", "--seeds", "0",
                                     "--out", str(out)])
    recs = _records(out)
    assert [(r["seed"], r["rows"], r["updates"]) for r in recs] == [(0, *w) for w in want]
    assert all(math.isfinite(x) for r in recs for x in r["eval_returns"])
    assert math.isfinite(recs[-1]["train"]["opt_loss"])
    eps = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert {e["worker"] for e in eps} - set(range(8)) == set()  # the envs of both processes
    assert {e["worker"] // 4 for e in eps} == {0, 1}  # both processes' envs ended episodes


REFUSALS = {  # version flags, devices per process -> the one line
    "29eb964": ([], 2, "--devices 1 x --data-devices 2 uses the devices of 1 of the 2 "
                "processes: every process of a --distributed run needs its part of the "
                "mesh (ask for all 4 devices)"),
    "e3f0224": (HEAD, 1, "--devices 1 x --data-devices 2 needs 2 devices on each process "
                "but only 1 JAX device is visible to each"),
}


@pytest.mark.parametrize("version", sorted(REFUSALS))
def test_devices_a_process_lacks_are_refused_in_one_line(tmp_path, version):
    """29eb964 counts a seed's devices over all processes: two data devices of two
    processes' four leave process 1 none. e3f0224 counts each process's own: two of the
    one each has. Both refused in one line before compiling, by every process."""
    flags, per_process, line = REFUSALS[version]
    argv = [sys.executable, "-m", "dreamerjax.tools.cli", "train", *flags, *SMALL_ARGV,
            "--steps", "80", "--data-devices", "2", "--out", str(tmp_path / "run"),
            "--no-precompile", "--distributed",
            "--coordinator", f"127.0.0.1:{free_port()}", "--num-processes", "2"]
    procs = [subprocess.Popen([*argv, "--process-id", str(i)],
                              env=host_devices_env(per_process), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for i in (0, 1)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 2, err[-2000:]
        lines = [line for line in err.splitlines() if "error" in line]
        assert lines == [f"dreamerjax train: error: {line}"], err
    assert not (tmp_path / "run" / "records.jsonl").exists()
