"""One seed's agent with its parameters in FSDP slices across two processes: `dreamerjax
train --distributed` on localhost, 2 processes with 2 forced host devices each, HEAD's
(--reference e3f0224) small CartPole run on each process's --data-devices 2 as
jax.train_mesh 1,-1,1 (HEAD reads the mesh over the train devices of every process: 1,4,1),
so each device keeps a quarter of every parameter the rule splits (algo/fsdp.py), half of
them held by the other process, joined by real jax.distributed.

Every program that gathers the slices across the processes (the chunk's updates and
acting, each log point's evaluation, the open-loop report at the last) is compiled ahead
and started at a barrier. The run passes its three log points, the updates starting in
the third (HEAD's gate), with finite evaluation returns, and process 0 writes the records
once and the report.

Slow tier: 187 s of wall time (98 s of CPU time) on a 2-core x86_64 machine under load.
"""

import json
import math

import pytest
from _runs import small_argv
from _xla import host_devices_env, train_in_processes


@pytest.mark.slow
def test_two_processes_train_one_seed_in_fsdp_slices(tmp_path):
    out = tmp_path / "run"
    argv = [*small_argv(240), "--reference", "e3f0224", "--seeds", "0", "--data-devices", "2",
            "--set", "jax.train_mesh=1,-1,1", "--out", str(out), "--no-precompile"]
    train_in_processes(argv, [tmp_path / f"p{i}.log" for i in (0, 1)], host_devices_env(2),
                       1500)
    config = json.loads((out / "config.json").read_text())
    assert config["run"]["train_devices"] == [0, 1]  # each process's own, as given
    assert config["run"]["train_mesh"] == "1,-1,1"
    with open(out / "records.jsonl") as f:
        recs = [json.loads(line) for line in f]
    # the rows of both processes' envs
    assert [(r["seed"], r["rows"]) for r in recs] == [(0, 160), (0, 320), (0, 480)]
    assert recs[-1]["updates"] > 0
    assert all(math.isfinite(x) for r in recs for x in r["eval_returns"])
    assert math.isfinite(recs[-1]["train"]["opt_loss"])
    assert [p.name for p in (out / "report").iterdir() if p.suffix == ".png"]
