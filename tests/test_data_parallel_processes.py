"""One seed's agent data-parallel over two processes: `dreamerjax train --distributed` on
localhost, 2 processes with 2 forced host devices each, joined by real jax.distributed.

At e3f0224, as HEAD, each process trains on its own devices (--data-devices 2: the two of
its own) with its own envs (--num-envs 4), its own replay and its own part of the batch
(batch_size 2 each, 4 in the update); the records count the rows of both. At 29eb964 the
config is the whole run's: --data-devices 4 counts the devices of both processes, which
split its 8 envs and batch 4. Process 0 writes the records once; a resume of both
processes continues the run to the same schedule."""

import json
import math

import pytest
from _runs import UPDATES, small_argv
from _xla import host_devices_env, train_in_processes

from dreamerjax.data import schedule


def _two_processes(tmp_path, tag: str, argv: list[str]) -> None:
    train_in_processes([*argv, "--no-precompile"],
                       [tmp_path / f"{tag}{i}.log" for i in (0, 1)], host_devices_env(2), 1500)


def _records(out):
    with open(out / "records.jsonl") as f:
        return [json.loads(line) for line in f]


def _head_updates(rows: int) -> int:
    """HEAD's count after `rows` rows of both processes: each process's own schedule (its
    4 envs, batch 2 x 16, its replay gate of 2 x 16 items) at its half of the rows."""
    own = schedule.make_schedule(train_ratio=32, batch_size=2, batch_length=16,
                                 replay_context=1, num_envs=4, min_items=2 * 16)
    return schedule.total_updates(own, rows // 2)


def _head_argv(steps: int) -> list[str]:
    argv = small_argv(steps)
    argv[argv.index("--num-envs") + 1] = "4"
    argv[argv.index("--eval-every") + 1] = "40"
    argv[argv.index("batch_size=4")] = "batch_size=2"
    return ["--reference", "e3f0224", *argv, "--data-devices", "2"]


VERSIONS = {  # version -> (argv of a run to `steps`, its train_devices, updates at rows)
    "e3f0224": (_head_argv, [0, 1], _head_updates, (120, 160), (240, 320)),
    "29eb964": (lambda steps: [*small_argv(steps), "--data-devices", "4"], [0, 1, 2, 3],
                UPDATES.__getitem__, (160, 240), (160, 240)),
}


@pytest.mark.parametrize("version", [
    "e3f0224", pytest.param("29eb964", marks=pytest.mark.slow)])
def test_two_processes_train_one_seed_data_parallel_and_resume(tmp_path, version):
    argv, devices, updates, (steps, more), (rows, end) = VERSIONS[version]
    out = tmp_path / "run"
    _two_processes(tmp_path, "fresh", [*argv(steps), "--seeds", "0", "--out", str(out)])
    first = _records(out)
    every = 80
    assert [(r["seed"], r["rows"], r["updates"]) for r in first] == [
        (0, n, updates(n)) for n in range(every, rows + 1, every)]  # written once
    config = json.loads((out / "config.json").read_text())
    assert config["run"]["train_devices"] == devices  # as given

    _two_processes(tmp_path, "resume", ["--resume", str(out), "--steps", str(more)])
    recs = _records(out)
    assert [(r["seed"], r["rows"], r["updates"]) for r in recs] == [
        (0, n, updates(n)) for n in range(every, end + 1, every)]
    assert recs[-1]["updates"] > 0
    assert recs[:len(first)] == first  # the resume kept what was written
    assert all(math.isfinite(x) for r in recs for x in r["eval_returns"])
    assert math.isfinite(recs[-1]["train"]["opt_loss"])
