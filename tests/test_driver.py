"""End-to-end: the shared small run (tests/_runs.py) and the protocol's schedule; resume
after a clean stop, a grown --steps and a crash's leftovers; checkpoints off; seed
independence.

Two seeds for the module's whole run (the program tests/test_outputs.py and
tests/test_policy.py compile too), one seed for the runs of one contract each (the
program the quick tier's run compiles), 160 rows where two log points suffice."""

import dataclasses
import json
import os
import time

import jax
import numpy as np
import pytest
from _runs import STEPS, read_scalars, small_config, without_timing

from dreamerjax.config.keys import ConfigError
from dreamerjax.config.resolve import make_config
from dreamerjax.run import callbacks, checkpoint, driver, records, rundir, status
from dreamerjax.run.plan import make_plan
from dreamerjax.run.resume import load_state
from dreamerjax.run.setup import make_setup
from dreamerjax.run.trainers import make_trainer

_cfg = small_config
EVERY = 80  # rows between log points (tests/_runs.py)
TICK = 8  # rows per tick: one per env


def _train(cfg, out, seeds=(0, 1), **kw):
    return driver.train(cfg, seeds, str(out), progress=False, **kw).records


def _strip(recs):
    return [without_timing(r) for r in recs]


@pytest.fixture(scope="module")
def whole(small_whole_run):
    """The session's small two-seed run (conftest.py), trained as _train trains."""
    return small_whole_run


def test_records_schedule_and_schema(whole):
    recs = records.read_records(whole)
    # The gate opens at row 132 (8 envs filled in turn: 4 of them hold a 17-row window
    # at 8 x 16 + 4 rows), then 0.5 updates per row (32 / (4 x 16)): 1 + (rows - 132) // 2
    # updates from it, none at row 80, 1 + 14 = 15 at 160 and 1 + 54 = 55 at 240.
    assert [(r["seed"], r["rows"], r["updates"]) for r in recs] == [
        (0, 80, 0), (1, 80, 0), (0, 160, 15), (1, 160, 15), (0, 240, 55), (1, 240, 55)]
    for r in recs:
        assert {"seed", "rows", "updates", "eval_mean", "eval_len_mean",
                "eval_returns", "train", "retnorm", "wall_s", "train_return",
                "host_s"} <= set(r)
        # The protocol's own fields are derived by `dreamerjax compare`, not written.
        assert not {"side", "s2_logged", "train_raw"} & set(r)
        assert len(r["eval_returns"]) == 2
        assert r["eval_mean"] == pytest.approx(np.mean(r["eval_returns"]))
    last = recs[-1]["train"]
    for name in ("vector_loss", "reward_loss", "cont_loss", "dyn_loss", "rep_loss",
                 "actor_loss", "critic_loss", "replay_critic_loss", "opt_grad_norm",
                 "ent/action/mean", "adv/std", "activation/embed"):
        assert last[name] is not None and np.isfinite(last[name]), name
    # No update before the gate: window means are empty (null) there.
    assert recs[0]["train"]["actor_loss"] is None
    eps = records.read_episodes(whole)
    assert eps and all(e["length"] == e["score"] for e in eps)
    assert all(e["row_last"] <= STEPS // TICK for e in eps)
    # train_return: the mean score of the seed's episodes that ended in the interval
    for r in recs:
        lo, hi = (r["rows"] - EVERY) // TICK, r["rows"] // TICK
        scores = [e["score"] for e in eps if e["seed"] == r["seed"] and lo < e["row_last"] <= hi]
        assert r["train_return"] == (pytest.approx(np.mean(scores)) if scores else None)
    for name in ("curves.png", "config.json", "metrics_losses.png"):
        assert (whole / name).exists(), name
    assert checkpoint.indices(whole) == [1, 2]  # of log points 0, 1, 2: the last two kept


def test_tensorboard_holds_every_record_once(whole):
    points = read_scalars(whole)
    for seed in (0, 1):
        evals = [(step, v) for tag, step, v in points[seed] if tag == "eval/eval_mean"]
        want = [(r["rows"], pytest.approx(r["eval_mean"]))
                for r in records.read_records(whole) if r["seed"] == seed]
        assert evals == want


@pytest.mark.slow  # three more runs; the kill test and test_replay's grow test keep both halves
def test_resume_grown_steps_and_crash_leftovers_equal_the_whole_run(tmp_path):
    """A run of 160 rows resumed to 240 (its replay ring grows from 20 to 30 rows per env)
    equals the 240-row run, also after a crash left a torn records line, an episode line
    and TensorBoard points beyond its checkpoint."""
    # The ring sized by --steps (replay_capacity 0: steps / 8 envs rows per env) rather
    # than the shared run's fixed 64 rows, so that the resume grows it.
    def grown(steps):
        return _cfg(steps=steps, replay_capacity=0)

    whole = tmp_path / "whole"
    _train(grown(STEPS), whole)
    assert make_setup(grown(STEPS)).capacity == 30
    out = tmp_path / "split"
    _train(grown(160), out)
    assert make_setup(grown(160)).capacity == 20
    with open(out / "records.jsonl", "a") as f:
        f.write(json.dumps(records.read_records(out)[-1]) + "\n" + '{"seed": 0, "rows": 16')
    with open(out / "episodes.jsonl", "a") as f:
        f.write(json.dumps(records.read_episodes(out)[-1]) + "\n")
    with records.RunWriter(out) as w:
        w.add_scalars(0, STEPS, {"eval/eval_mean": 123.0})
    _train(grown(STEPS), out, resume=True)
    assert _strip(records.read_records(whole)) == _strip(records.read_records(out))
    assert records.read_episodes(whole) == records.read_episodes(out)
    assert json.loads((out / "config.json").read_text())["run"]["steps"] == STEPS
    a, b = read_scalars(whole), read_scalars(out)
    assert {s: sorted(p) for s, p in a.items()} == {s: sorted(p) for s, p in b.items()}


@pytest.mark.slow  # the kill test (test_reliability.py) resumes after clean stops too
def test_resume_after_a_clean_stop_is_bitwise_equal(whole, tmp_path):
    out = tmp_path / "stopped"
    _train(_cfg(), out, stop_after_rows=160)
    assert len(records.read_records(out)) == 4  # rows 80 and 160 of both seeds
    _train(_cfg(), out, resume=True)
    assert _strip(records.read_records(whole)) == _strip(records.read_records(out))
    assert records.read_episodes(whole) == records.read_episodes(out)


def test_resume_of_a_complete_run_says_so_at_once(whole, tmp_path, monkeypatch, capsys):
    """`--resume` of a run at its last row trains nothing: one line says it is complete and
    what to pass to go on, before anything is built or compiled."""
    import shutil

    from dreamerjax.tools import cli

    out = tmp_path / "complete"
    shutil.copytree(whole, out)
    assert checkpoint.complete_rows(out, STEPS) == STEPS
    assert checkpoint.complete_rows(out, 2 * STEPS) is None  # a grown run goes on
    # the meta records the layout the run was made with (one process, one device)
    last = checkpoint.indices(out)[-1]
    assert checkpoint.read_meta(out, last)[checkpoint.LAYOUT_META] == {
        "processes": 1, "devices_per_process": 1, "mesh": {}}

    def refused(*args, **kwargs):
        raise AssertionError("a complete run was trained")

    monkeypatch.setattr(driver, "train", refused)
    assert cli.main(["train", "--resume", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.strip() == (f"dreamerjax train: {out} is complete at {STEPS} rows (--steps "
                           f"{STEPS}); to train on, pass a larger --steps: dreamerjax train "
                           f"--resume {out} --steps {2 * STEPS}")


def test_a_resumed_run_says_so_first(whole, tmp_path, capsys):
    """A resumed run's first line says that it resumes, and from which checkpoint and row;
    the next log point follows on from it."""
    import shutil

    out = tmp_path / "longer"
    shutil.copytree(whole, out)
    last = checkpoint.indices(out)[-1]
    capsys.readouterr()
    recs = driver.train(_cfg(steps=STEPS + EVERY), (0, 1), str(out), resume=True,
                        progress=True).records
    assert capsys.readouterr().err.splitlines()[0] == (
        f"[dreamerjax] CartPole-v1, seeds [0, 1]: resuming {out} from checkpoint {last} "
        f"(row {STEPS} of {STEPS + EVERY}), a log point every {EVERY}; compiling, then "
        "training to the next (a line at every log point)")
    assert [r["rows"] for r in recs] == [STEPS + EVERY] * 2


def test_train_takes_a_plan_in_place_of_a_config(tmp_path):
    """A Plan carries its config, seeds and devices: train refuses other seeds or a devices
    beside it, before the run directory is made (the plan is the command line's)."""
    plan = make_plan(_cfg(), (0, 1))
    with pytest.raises(ValueError, match=r"seeds: the plan was made for \[0, 1\], train was "
                       r"given \[0\]"):
        driver.train(plan, (0,), str(tmp_path / "a"), progress=False)
    with pytest.raises(ValueError, match=r"devices: a Plan has its own \(1\)"):
        driver.train(plan, (0, 1), str(tmp_path / "b"), devices=1, progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_target_return_stops_with_checkpoint_and_report(tmp_path, capsys):
    """--target-return: the run ends at the first log point where every seed's evaluation
    reaches it, with that point's checkpoint, open-loop report and status line (the line
    that shows the return reached), then the reason; an unreached target changes nothing."""
    assert driver.target_reached([{"eval_mean": 30.0}, {"eval_mean": 9.0}], 10.0) is None
    assert driver.target_reached([{"eval_mean": 30.0}, {"eval_mean": 10.0}], 10.0)
    assert driver.target_reached([{"eval_mean": 30.0}], None) is None
    out = tmp_path / "target"
    # log points at rows 160 (15 updates: a report can be made) and 320
    cfg = _cfg(steps=320, eval_every=160, report_every=5)
    recs = driver.train(cfg, (0,), str(out), target_return=-1.0).records
    assert [r["rows"] for r in recs] == [160]  # CartPole's returns are >= 0 > -1
    err = capsys.readouterr().err
    # said at once, before the compile (a notebook sees it; stderr here is no terminal)
    assert err.splitlines()[0] == ("[dreamerjax] CartPole-v1, seeds [0]: 320 rows, a log "
                                   "point every 160; compiling, then training to the first "
                                   "(a line at every log point)")
    said = [line for line in err.splitlines()  # the progress bar's lines left out
            if line.startswith(("[dreamerjax] rows", "dreamerjax:"))]
    assert said[-2].startswith("[dreamerjax] rows 160 updates 15 eval_return "), err
    assert said[-1].startswith("dreamerjax: every seed's evaluation return reached -1 "
                               "(--target-return): stopped at row 160 after its checkpoint")
    assert checkpoint.indices(out) == [0]
    assert any((out / "report").iterdir())  # off the report_every schedule, at the stop
    far = tmp_path / "far"
    recs = _train(_cfg(steps=160, report_every=5), far, seeds=(0,), target_return=1e9)
    assert [r["rows"] for r in recs] == [80, 160]


def test_checkpoint_every_zero_trains_to_the_end_without_checkpoints(tmp_path):
    """--checkpoint-every 0 once divided by zero after the first chunk."""
    out = tmp_path / "nock"
    recs = _train(_cfg(steps=160, checkpoint_every=0), out, seeds=(0,))  # two chunks
    assert [r["rows"] for r in recs] == [80, 160]
    assert checkpoint.indices(out) == []


def test_wall_s_counts_the_chunk_it_records(tmp_path, monkeypatch):
    """The chunk runs asynchronously: wall_s must be read once its results are on the host
    (it was read at dispatch, so a record missed its own interval's run time). A delay
    where the results arrive is counted in the record, not only in the checkpoint after."""
    real = driver.to_host

    def late(tree):  # the chunk's results arriving 3 s later, as from a long chunk
        time.sleep(3.0)
        return real(tree)

    monkeypatch.setattr(driver, "to_host", late)
    out = tmp_path / "late"
    recs = _train(_cfg(steps=160), out, seeds=(0,), report=False)  # two chunks
    walls = [r["wall_s"] for r in recs]
    assert walls[0] >= 3.0 and walls[1] - walls[0] >= 3.0
    # the checkpoint's clock is read after the records are written: only the writing apart
    meta = checkpoint.read_meta(out, checkpoint.indices(out)[-1])
    assert 0.0 <= meta["wall_s"] - walls[-1] < 3.0


@pytest.mark.slow  # a third tiny run; tests/test_agent.py checks vmapped seeds stay apart
def test_seed_records_do_not_depend_on_other_seeds(whole, tmp_path):
    out = tmp_path / "other"
    _train(_cfg(), out, seeds=(0, 2))
    a = [r for r in records.read_records(whole) if r["seed"] == 0]
    b = [r for r in records.read_records(out) if r["seed"] == 0]
    for x, y in zip(a, b, strict=True):
        assert x["eval_returns"] == y["eval_returns"]
        assert x["train"] == y["train"]
    c = [r for r in records.read_records(whole) if r["seed"] == 1]
    assert c[-1]["train"] != a[-1]["train"]


def test_callbacks_see_log_points_and_their_state_survives_resume(tmp_path):
    class Count:
        name = "count"

        def __init__(self):
            self.n = 0

        def on_log(self, point):
            self.n += 1
            for r in point.records:
                r["log_points_seen"] = self.n

        def state_dict(self):
            return {"n": self.n}

        def load_state_dict(self, state):
            self.n = state["n"]

    out = tmp_path / "cb"
    cfg = _cfg(steps=160)  # two log points, one in each call
    driver.train(cfg, (0,), str(out), progress=False,
                 callbacks=[Count()], stop_after_rows=80)
    driver.train(cfg, (0,), str(out), resume=True, progress=False,
                 callbacks=[Count()])
    assert [r["log_points_seen"] for r in records.read_records(out)] == [1, 2]


def test_status_line_is_one_greppable_line():
    from dreamerjax.algo import agent

    train = {"vector_loss": 1.0, "reward_loss": 2.0, "cont_loss": 3.0, "dyn_loss": 4.0,
             "rep_loss": 5.0, "actor_loss": 100.0, "critic_loss": 200.0,
             "replay_critic_loss": 300.0, "ent/action/mean": 0.5}
    recs = [records.record_row(s, 1600, 281, [10.0 + s], [10], train, None, 1.0, 20.0)
            for s in (0, 1)]
    point = callbacks.LogPoint(3, 1600, (0, 1), 16, recs, [], _cfg())
    scales = agent.loss_scales(_cfg().agent, make_setup(_cfg()).spaces)
    line = status.status_line(point, 2.5, scales)
    assert line == ("[dreamerjax] rows 1600 updates 281 eval_return 10.5 train_return 20.0 "
                    "wm_loss 10.500 actor_entropy 0.500 updates/s 2.50")
    assert status.world_model_loss(train, scales) == pytest.approx(1 + 2 + 3 + 4 + 0.5)
    # e3f0224's metrics name the entropy `ent/action` (status.STATUS_METRICS)
    train["ent/action"] = train.pop("ent/action/mean")
    recs = [records.record_row(s, 1600, 281, [10.0 + s], [10], train, None, 1.0, 20.0)
            for s in (0, 1)]
    point = callbacks.LogPoint(3, 1600, (0, 1), 16, recs, [], _cfg())
    assert status.status_line(point, 2.5, scales) == line


def test_bad_config_is_refused_before_compiling(tmp_path):
    with pytest.raises(ValueError, match="Unknown|unknown"):
        make_setup(make_config("NoSuchEnv-v0", tiny=True))
    with pytest.raises(ConfigError, match=r"run.eval_every_rows: 800 must divide run.steps"):
        make_config("CartPole-v1", tiny=True, steps=2000, eval_every=800)
    # A Config built in Python (not resolved) meets the same one check (config/validate.py)
    # in the run's plan (make_plan, which train makes), seeds included, before anything
    # is built or written.
    out = tmp_path / "run"
    bad = dataclasses.replace(_cfg(), run=dataclasses.replace(_cfg().run, steps=2040))
    for call in (lambda: make_plan(bad, (0,)), lambda: _train(bad, out)):
        with pytest.raises(ConfigError, match=r"run.eval_every_rows: 80 must divide run.steps"):
            call()
    with pytest.raises(ConfigError, match=r"run.num_envs: expects int, got 8.0"):
        make_plan(dataclasses.replace(_cfg(), run=dataclasses.replace(_cfg().run,
                                                                      num_envs=8.0)), (0,))
    with pytest.raises(ConfigError, match=r"seeds: must be unique; repeated: \[0\]"):
        _train(_cfg(), out, seeds=(0, 1, 0))
    assert not out.exists()


def test_a_resumed_state_lowers_to_the_fresh_runs_program(whole):
    """A state restored from a checkpoint is placed as a fresh one is, so a resume runs the
    program the run compiled (loaded from the compilation cache) instead of compiling a
    second one annotated with the restored arrays' placement."""
    trainer = make_trainer(make_plan(_cfg(), (0, 1)))
    fresh = trainer.init()
    index, meta = checkpoint.latest_verified(whole)
    restored = load_state(trainer, str(whole), index, meta)
    assert ({x.sharding for x in jax.tree.leaves(restored)}
            == {x.sharding for x in jax.tree.leaves(fresh)})
    due = trainer.owed(0)
    if trainer.threads:  # run.seed_loop threads (a CPU's auto): split, then 1-seed chunks
        assert trainer._split.lower(restored).as_text() == trainer._split.lower(fresh).as_text()
        restored, fresh = trainer._split(restored)[0], trainer._split(fresh)[0]
        assert restored.updates.shape == (1,)
    assert (trainer._chunk.lower(restored, due).as_text()
            == trainer._chunk.lower(fresh, due).as_text())


def test_eval_of_a_run_uses_its_latest_checkpoint(whole):
    rows = rundir.evaluate_run(str(whole), episodes=2)
    assert [r["seed"] for r in rows] == [0, 1]
    assert all(len(r["returns"]) == 2 and r["mean"] > 0 for r in rows)
    assert os.path.isdir(whole / "checkpoints")


def test_open_loop_report_and_videos(whole, tmp_path):
    """The report written at the last log point, and `eval --report --video` artefacts."""
    import imageio.v3 as iio

    png = whole / "report" / "openl_vector.png"
    assert png.exists() and iio.imread(png).shape[-1] in (3, 4)
    assert (whole / "report" / "openl_vector_heatmap.png").exists()
    for name in ("episode.gif", "episode.mp4"):
        files = rundir.eval_artifacts(str(whole), report=True, video=tmp_path / name)
        assert tmp_path / name in files and png in files
        frames = iio.imread(tmp_path / name)
        assert frames.ndim == 4 and frames.shape[1:3] == (256, 256) and len(frames) >= 10


def test_open_loop_strip_of_image_keys(tmp_path):
    """Image keys: a PNG strip and a GIF of truth | prediction | error per sequence."""
    import imageio.v3 as iio

    from dreamerjax.viz import report

    rng = np.random.default_rng(0)
    truth = rng.uniform(size=(8, 12, 16, 16, 3)).astype(np.float32)
    rep = {"context": 6, "truth/image": truth, "pred/image": truth * 0.5,
           "reward": np.zeros((8, 12)), "pred_reward": np.zeros((8, 12)),
           "cont": np.ones((8, 12)), "pred_cont": np.ones((8, 12))}
    files = report.write_openl(rep, tmp_path)
    assert sorted(p.name for p in files) == ["openl_image.gif", "openl_image.png"]
    strip = iio.imread(tmp_path / "openl_image.png")
    assert strip.shape == (3 * 16, 12 * 6 * 16, 3)  # [3H, T * S * W, RGB]
    gif = iio.imread(tmp_path / "openl_image.gif")
    assert gif.shape[0] == 12
    # the error column of a perfect prediction is mid-grey
    frames = report.image_strip(truth, truth)
    assert np.all(np.abs(frames[:, 32:48].astype(int) - 128) <= 1)


def test_the_run_writes_when_it_reached_each_moment(whole):
    """run_dir/timing.json: the call's moments in their order, from the process's start,
    and its phases; the log intervals' chunk seconds are the records' host_s."""
    from dreamerjax.run import host_time

    timing = json.loads((whole / host_time.TIMING_FILE).read_text())
    at = timing["seconds"]
    assert list(at) == [m for m in host_time.MARKS if m in at]
    assert {"start", "train", "compile_start", "programs_ready", "first_log_point",
            "last_log_point", "end"} <= set(at)
    assert at["start"] == 0 < at["train"]  # the process started before its run
    assert list(at.values()) == sorted(at.values())
    assert timing["started"] <= os.stat(whole / "config.json").st_mtime
    recs = [r for r in records.read_records(whole) if r["seed"] == 0]
    phases = timing["phases"]
    assert phases["chunks"] == pytest.approx(sum(r["host_s"]["chunk"] for r in recs),
                                             abs=0.01)
    assert phases["end"] == pytest.approx(at["end"] - at["last_log_point"], abs=0.002)


def test_process_age_counts_from_the_process_start():
    import subprocess
    import sys

    code = ("import time; time.sleep(1.0)\n"
            "from dreamerjax.run.host_time import process_age\n"
            "print(process_age())")
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)
    assert 1.0 <= age < 60
