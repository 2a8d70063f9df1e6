"""benchmarks/reference_run's e3f0224 harness, the parts that run without the reference:
its settings are the protocol run's on our side (results/cartpole_protocol_e3f0224), its
schedule checks refuse what its loop leaves out, and a run directory written before
`--version` existed resumes as 29eb964."""

import argparse
import json
import pathlib
import types

import pytest
from _benchmarks import load

ROOT = pathlib.Path(__file__).resolve().parent.parent
head = load("reference_run/run_reference_head.py")
base = load("reference_run/harness.py")


def test_settings_are_those_of_our_e3f0224_protocol_run():
    ours = json.loads((ROOT / "results/cartpole_protocol_e3f0224/seed0/config.json")
                      .read_text())
    run, agent = ours["run"], ours["agent"]
    p = head.PROTOCOL
    assert agent["reference"] == head.VERSION == "e3f0224"
    assert p["run.train_ratio"] == run["train_ratio"] == 512.0
    assert p["run.envs"] == run["num_envs"] == 16
    assert p["batch_size"] == run["batch_size"] == 16
    # the reference's batch_length counts the trained rows; the context row is apart
    assert p["batch_length"] == run["batch_length"] == 64
    assert p["replay_context"] == run["replay_context"] == 1
    assert p["jax.compute_dtype"] == agent["compute_dtype"] == "float32"
    assert p["jax.platform"] == "cpu"
    # our 1m widths are the reference's size1m preset at e3f0224
    assert head.SIZES["1m"] == "size1m"
    assert (agent["rssm"]["deter"], agent["rssm"]["hidden"], agent["rssm"]["classes"],
            agent["actor"]["units"], agent["enc"]["depth"]) == (512, 64, 4, 64, 4)


def _args(**over):
    fields = {"log_every": 0, "report_every": 0, "save_every": 0, "debug": True,
              "consec_train": 1, "envs": 16}
    fields.update(over)
    return types.SimpleNamespace(**fields)


OPTS = {"eval_every": 2000, "rows": 20000}


def test_schedule_accepts_the_protocol():
    head.check_schedule(_args(), OPTS)


@pytest.mark.parametrize("over, opts, word", [
    ({"report_every": 300}, OPTS, "report_every"),
    ({"log_every": -1}, OPTS, "log_every"),
    ({"debug": False}, OPTS, "run.debug"),
    ({"consec_train": 2}, OPTS, "consec_train"),
    ({}, {"eval_every": 2008, "rows": 20000}, "--eval-every"),
    ({}, {"eval_every": 1600, "rows": 20000}, "--eval-every"),
])
def test_schedule_refusals_name_the_key(over, opts, word):
    with pytest.raises(SystemExit, match=word.replace(".", r"\.")):
        head.check_schedule(_args(**over), opts)


def _resume_args(out):
    return argparse.Namespace(out=str(out), resume=True, checkout=None)


def test_a_run_directory_without_version_resumes_as_29eb964(tmp_path):
    opts = {k: None for k in base.OPTIONS if k != "version"}
    (tmp_path / "harness.json").write_text(json.dumps(opts))
    (tmp_path / "checkpoint.ckpt").write_bytes(b"")
    assert base.resolve_options(_resume_args(tmp_path))["version"] == "29eb964"


def test_resume_looks_for_the_checkpoint_of_its_version(tmp_path):
    opts = {k: None for k in base.OPTIONS} | {"version": "e3f0224"}
    (tmp_path / "harness.json").write_text(json.dumps(opts))
    (tmp_path / "checkpoint.ckpt").write_bytes(b"")  # 29eb964's file does not count
    with pytest.raises(SystemExit, match="no checkpoint"):
        base.resolve_options(_resume_args(tmp_path))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest").write_text("20261206T000000-000000002000\n")
    assert base.resolve_options(_resume_args(tmp_path))["version"] == "e3f0224"


copy = load("reference_run/copy_records.py")


def test_copy_records_leaves_partial_lines_and_machine_paths_behind(tmp_path):
    run, dest = tmp_path / "run", tmp_path / "results" / "reference_s0"
    run.mkdir()
    (run / "harness.json").write_text(json.dumps({"seed": 0, "checkout": "/abs/ref"}))
    (run / "config.yaml").write_text("batch_size: 16\nlogdir: /abs/run\nseed: 0\n")
    (run / "records.jsonl").write_text('{"rows": 2000}\n{"rows": 4000}\n{"rows": 60')
    (run / "episodes.jsonl").write_text('{"score": 12.0}\n')
    (dest).mkdir(parents=True)
    (dest / "timing.json").write_text("{}")  # an earlier copy of a run resumed since
    copied = copy.copy_records(run, dest)
    assert copied == {"records.jsonl": 2, "episodes.jsonl": 1, "harness.json": 1}
    assert (dest / "records.jsonl").read_text() == '{"rows": 2000}\n{"rows": 4000}\n'
    assert json.loads((dest / "harness.json").read_text())["checkout"] == "REFERENCE_CHECKOUT"
    assert not (dest / "config.yaml").exists()  # the reference's own defaults stay out
    assert not (dest / "timing.json").exists()
    (run / "timing.json").write_text('{"wall_s": 1.0}')
    assert copy.copy_records(run, dest)["timing.json"] == 1
    assert json.loads((dest / "timing.json").read_text()) == {"wall_s": 1.0}


def test_copy_records_refuses_a_directory_of_no_run(tmp_path):
    with pytest.raises(SystemExit, match="harness.json"):
        copy.copy_records(tmp_path, tmp_path / "out")
