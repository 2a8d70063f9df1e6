"""The W&B and MLflow outputs (logger.outputs) on the real packages, offline: W&B in its
offline mode (its .wandb files under the run directory, read back here), MLflow in its
SQLite store under the run directory. The shared small two-seed run (tests/_runs.py)
stopped at its second log point and resumed, then an evaluation video: every log point
reaches both once, in the same runs, with the numbers of records.jsonl."""

import dataclasses
import json
import struct
from pathlib import Path

import pytest
from _runs import offline_loggers, read_scalars, small_config

from dreamerjax.config.defaults import LoggerConfig
from dreamerjax.run import callbacks, driver, outputs, records, rundir, status
from dreamerjax.run.setup import make_setup

wandb = pytest.importorskip("wandb")
mlflow = pytest.importorskip("mlflow")

SEEDS = (0, 1)
# Log points at rows 80, 160 and 240 (tests/_runs.py). The first call stops after row 160,
# the first log point past the gate (row 132): the stopped call's last point has updates
# and a report; the resumed call adds row 240 only.
ROWS = [80, 160, 240]
STOP = 160


def _cfg(outputs=("jsonl", "wandb", "mlflow")):
    # The loggers are host-side: the compiled program is the shared small run's.
    return dataclasses.replace(small_config(), logger=LoggerConfig(outputs=outputs))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run stopped after its first log point, resumed to the end, then an evaluation
    video; returns (run_dir, loggers.json after the first call)."""
    out = tmp_path_factory.mktemp("loggers") / "cartpole"
    with offline_loggers():
        kw = dict(progress=False)
        driver.train(_cfg(), SEEDS, str(out), stop_after_rows=STOP, **kw)
        first = outputs.read_state(out)
        driver.train(_cfg(), SEEDS, str(out), resume=True, **kw)
        rundir.eval_artifacts(str(out), video=out / "episode.mp4")
    return out, first


# ----------------------------------------------------------------------------- W&B files


def _wandb_records(path: Path):
    """The protobuf records of a .wandb file (W&B's LevelDB-style log: a 7-byte header,
    32 KiB blocks of chunks, each with a 7-byte header: CRC, length, type)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the block's tail is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            pos += block - pos % block
            continue
        buf += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = pb.Record()
            record.ParseFromString(buf)
            buf = b""
            yield record


def _wandb_run(run_dir: Path, run_id: str) -> dict:
    """What the offline files of one W&B run hold, over every process that wrote it:
    {'ids', 'groups', 'config', 'history': [{key: value}]}."""
    files = sorted(run_dir.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert files, f"no offline W&B files of run {run_id}"
    seen = {"files": len(files), "ids": set(), "groups": set(), "config": {}, "history": []}
    for path in files:
        for rec in _wandb_records(path):
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                seen["ids"].add(rec.run.run_id)
                seen["groups"].add(rec.run.run_group)
            elif kind == "config":
                seen["config"].update({u.key: json.loads(u.value_json)
                                       for u in rec.config.update})
            elif kind == "history":
                seen["history"].append({
                    i.key or "/".join(i.nested_key): json.loads(i.value_json)
                    for i in rec.history.item})
    return seen


def test_wandb_gets_every_log_point_once_in_one_run_per_seed(run):
    out, first = run
    ids = outputs.read_state(out)["wandb"]["ids"]
    assert ids == first["wandb"]["ids"]  # the resume continued the same runs
    recs = records.read_records(out)
    for seed in SEEDS:
        seen = _wandb_run(out, ids[str(seed)])
        assert seen["ids"] == {ids[str(seed)]}
        assert seen["groups"] == {"cartpole"}  # grouped by the run's name
        assert seen["config"]["seed"] == seed and seen["config"]["seeds"] == list(SEEDS)
        assert seen["config"]["task"] == "CartPole-v1"
        assert seen["config"]["logger.outputs"] == ["jsonl", "wandb", "mlflow"]
        points = [h for h in seen["history"] if "eval/eval_mean" in h]
        mine = [r for r in recs if r["seed"] == seed]
        # Each log point once (the stopped call sent 80 and 160, the resumed one 240 only).
        assert [h["_step"] for h in points] == [r["rows"] for r in mine] == ROWS
        for h, r in zip(points, mine, strict=True):
            assert h["eval/eval_mean"] == pytest.approx(r["eval_mean"])
            assert h["updates"] == r["updates"]
            # null before the gate's first update (row 80): not sent, as W&B has no null
            want = r["train"]["dyn_loss"]
            assert h.get("train/dyn_loss") == (None if want is None else pytest.approx(want))
        assert points[-1]["train/dyn_loss"] is not None
    assert _wandb_run(out, ids["0"])["files"] == 3  # two train calls and the evaluation
    report = sorted(p.stem for p in (out / "report").glob("*.png"))  # the report's pictures
    assert report == ["openl_vector", "openl_vector_heatmap"]
    # Media (their fields: path, _type, ...) in the first seed's run only.
    kinds = {seed: {k.removesuffix("/_type"): h[k] for h in _wandb_run(out, ids[str(seed)])[
        "history"] for k in h if k.endswith("/_type")} for seed in SEEDS}
    assert kinds == {0: {**{f"report/{name}": "image-file" for name in report},
                         "eval/episode": "video-file"}, 1: {}}


def test_mlflow_gets_params_metrics_and_artifacts_in_the_same_runs(run):
    out, first = run
    state = outputs.read_state(out)["mlflow"]
    assert {k: state[k] for k in ("parent", "children")} == \
        {k: first["mlflow"][k] for k in ("parent", "children")}
    assert state["uri"] == f"sqlite:///{out.resolve() / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=state["uri"])
    runs = client.search_runs([state["experiment"]])
    assert len(runs) == 3  # the parent and one child per seed: nothing new on resume
    parent = client.get_run(state["parent"])
    assert parent.info.status == "FINISHED" and parent.info.run_name == "cartpole"
    assert parent.data.params["task"] == "CartPole-v1"
    assert json.loads(parent.data.params["seeds"]) == list(SEEDS)
    assert json.loads(parent.data.params["logger.outputs"]) == ["jsonl", "wandb", "mlflow"]
    recs = records.read_records(out)
    for seed in SEEDS:
        child = client.get_run(state["children"][str(seed)])
        assert child.data.tags["mlflow.parentRunId"] == state["parent"]
        assert child.data.params["seed"] == str(seed) and child.info.status == "FINISHED"
        history = client.get_metric_history(child.info.run_id, "eval/eval_mean")
        mine = [r for r in recs if r["seed"] == seed]
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == \
            [(r["rows"], r["eval_mean"]) for r in mine] and len(mine) == len(ROWS)
    files = {f.path for f in client.list_artifacts(state["parent"])}
    assert {"curves.png", "episode.mp4", "report"} <= files
    assert [f.path for f in client.list_artifacts(state["parent"], "report")] == \
        ["report/openl_vector.png", "report/openl_vector_heatmap.png"]
    assert (out / "mlartifacts").is_dir()  # artifacts under the run directory too


def test_outputs_without_tensorboard_write_no_event_files(run):
    out, _ = run
    assert not (out / records.TB_DIR).exists()
    # records.jsonl is always written: every log point of both seeds
    assert len(records.read_records(out)) == len(ROWS) * len(SEEDS)


def test_outputs_may_change_on_resume(tmp_path, monkeypatch):
    """logger.outputs may change on resume: the run stopped after row 160 with W&B and
    resumed with MLflow and TensorBoard instead. W&B stops (its runs hold 80 and 160
    only), MLflow starts at the resumed log point (240 only), TensorBoard's event files are
    rebuilt from records.jsonl (every point), and config.json holds the new list."""
    monkeypatch.setenv("WANDB_MODE", "offline")  # W&B's own switch: no network
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = tmp_path / "changed"
    kw = dict(progress=False)
    driver.train(_cfg(("jsonl", "wandb")), SEEDS, str(out), stop_after_rows=STOP, **kw)
    assert set(outputs.read_state(out)) == {"wandb"}
    after = _cfg(("jsonl", "tensorboard", "mlflow"))
    driver.train(after, SEEDS, str(out), resume=True, **kw)
    state = outputs.read_state(out)
    assert set(state) == {"wandb", "mlflow"}
    assert records.read_run_config(out)[0].logger.outputs == after.logger.outputs
    recs = records.read_records(out)
    assert sorted({r["rows"] for r in recs}) == ROWS
    client = mlflow.MlflowClient(tracking_uri=state["mlflow"]["uri"])
    for seed in SEEDS:
        seen = _wandb_run(out, state["wandb"]["ids"][str(seed)])
        assert seen["files"] == 1  # the first call only
        assert [h["_step"] for h in seen["history"] if "eval/eval_mean" in h] == ROWS[:2]
        history = client.get_metric_history(state["mlflow"]["children"][str(seed)],
                                            "eval/eval_mean")
        assert [m.step for m in history] == ROWS[2:]
    tb = read_scalars(out)
    for seed in SEEDS:  # each point once
        assert [step for tag, step, _ in tb[seed] if tag == "eval/eval_mean"] == ROWS


def test_a_bad_output_name_is_refused_naming_the_choices(tmp_path, capsys):
    from dreamerjax.tools import cli

    for args in (["--set", "logger.outputs=jsonl,scope"], ["--logger.outputs", "jsonl",
                                                             "scope"]):
        code = cli.main(["train", "--env", "CartPole-v1", "--tiny", "--out",
                         str(tmp_path / "r"), *args])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1
        assert "logger.outputs: 'scope' is not an output here; choose from jsonl, " \
               "tensorboard, wandb, mlflow" in err
    assert not (tmp_path / "r").exists()


def test_status_line_shows_what_logger_filter_finds():
    from dreamerjax.algo import agent

    train = {"vector_loss": 1.0, "reward_loss": 2.0, "cont_loss": 3.0, "dyn_loss": 4.0,
             "rep_loss": 5.0, "ent/action/mean": 0.5}
    recs = [records.record_row(s, 800, 100, [10.0 + s], [10], train, None, 1.0, 20.0)
            for s in SEEDS]
    cfg = _cfg()
    scales = agent.loss_scales(cfg.agent, make_setup(cfg).spaces)

    def line(pattern):
        config = dataclasses.replace(cfg, logger=LoggerConfig(filter=pattern))
        point = callbacks.LogPoint(1, 800, SEEDS, 4, recs, [], config)
        return status.status_line(point, 2.5, scales)

    assert line(LoggerConfig().filter) == (
        "[dreamerjax] rows 800 updates 100 eval_return 10.5 train_return 20.0 wm_loss 10.500 "
        "actor_entropy 0.500 updates/s 2.50")
    assert line("eval_return|train/dyn") == (
        "[dreamerjax] rows 800 updates 100 eval_return 10.5 train/dyn_loss 4")
    assert line("^$") == "[dreamerjax] rows 800 updates 100"


def test_a_run_failing_before_its_trainer_runs_ends_its_outputs(tmp_path, monkeypatch):
    """W&B and MLflow runs start before the trainer is built and compiled: a failure there
    ends them as failed (W&B exit code 1, MLflow FAILED), none is left running."""
    monkeypatch.setenv("WANDB_MODE", "offline")  # W&B's own switch: no network
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    def broken_trainer(*args, **kwargs):
        raise RuntimeError("injected: the trainer could not be built")

    monkeypatch.setattr(driver, "make_trainer", broken_trainer)
    out = tmp_path / "failed"
    with pytest.raises(RuntimeError, match="injected"):
        driver.train(_cfg(), SEEDS, str(out), progress=False)
    state = outputs.read_state(out)
    client = mlflow.MlflowClient(tracking_uri=state["mlflow"]["uri"])
    runs = client.search_runs([state["mlflow"]["experiment"]])
    assert {r.info.run_id for r in runs} == {state["mlflow"]["parent"],
                                            *state["mlflow"]["children"].values()}
    assert [r.info.status for r in runs] == ["FAILED"] * 3
    for seed in SEEDS:
        run_id = state["wandb"]["ids"][str(seed)]
        files = sorted(out.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))
        exits = [rec.exit.exit_code for path in files for rec in _wandb_records(path)
                 if rec.WhichOneof("record_type") == "exit"]
        assert exits == [1], exits  # finished, as failed
