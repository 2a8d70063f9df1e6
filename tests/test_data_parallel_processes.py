"""One seed's agent data-parallel over two processes: `dreamerjax train --distributed` on
localhost, 2 processes with 2 forced host devices each, the seed's 8 envs and its batch
split over all 4 devices (--data-devices 4), joined by real jax.distributed. Process 0
writes the records once; a resume of both processes continues the run to the same
schedule."""

import json
import math
import os
import socket
import subprocess
import sys

from _runs import UPDATES, small_argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(tmp_path, tag: str, argv: list[str]) -> None:
    port = _free_port()
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    base = [sys.executable, "-m", "dreamerjax.tools.cli", "train", *argv, "--no-precompile",
            "--distributed", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
    # Output goes to files, not pipes: a process blocked on a full pipe would stall the
    # other in the gradient average.
    logs = [tmp_path / f"{tag}{i}.log" for i in (0, 1)]
    procs = []
    for i, log in enumerate(logs):
        with open(log, "w") as f:
            procs.append(subprocess.Popen([*base, "--process-id", str(i)], env=env,
                                          stdout=f, stderr=subprocess.STDOUT))
    try:
        for p in procs:
            p.wait(timeout=1500)
    finally:
        for p in procs:
            p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log.read_text()[-4000:]


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
