"""One seed's agent data-parallel over two processes: `dreamerjax train --distributed` on
localhost, 2 processes with 2 forced host devices each, the seed's 8 envs and its batch
split over all 4 devices (--data-devices 4), joined by real jax.distributed. Process 0
writes the records once; a resume of both processes continues the run to the same
schedule."""

import json
import math

from _runs import UPDATES, small_argv
from _xla import host_devices_env, train_in_processes


def _two_processes(tmp_path, tag: str, argv: list[str]) -> None:
    train_in_processes([*argv, "--no-precompile"],
                       [tmp_path / f"{tag}{i}.log" for i in (0, 1)], host_devices_env(2), 1500)


def _records(out):
    with open(out / "records.jsonl") as f:
        return [json.loads(line) for line in f]


def test_two_processes_train_one_seed_data_parallel_and_resume(tmp_path):
    out = tmp_path / "run"
    _two_processes(tmp_path, "fresh", [*small_argv(160), "--seeds", "0", "--data-devices",
                                       "4", "--out", str(out)])
    first = _records(out)
    assert [(r["seed"], r["rows"], r["updates"]) for r in first] == [
        (0, 80, UPDATES[80]), (0, 160, UPDATES[160])]  # one line per log point: written once
    config = json.loads((out / "config.json").read_text())
    assert config["run"]["train_devices"] == [0, 1, 2, 3]

    _two_processes(tmp_path, "resume", ["--resume", str(out), "--steps", "240"])
    recs = _records(out)
    assert [(r["seed"], r["rows"], r["updates"]) for r in recs] == [
        (0, rows, UPDATES[rows]) for rows in (80, 160, 240)]
    assert recs[:2] == first  # the resume kept what was written
    assert all(math.isfinite(x) for r in recs for x in r["eval_returns"])
    assert math.isfinite(recs[-1]["train"]["opt_loss"])
