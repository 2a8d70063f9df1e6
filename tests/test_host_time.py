"""What a log point costs on the host, bounded and recorded: the open-loop report's fixed
number of vector panels and its heat map, `host_s` in the records, run.report_every, the
status line before the first update."""

from __future__ import annotations

import numpy as np
import pytest
from _runs import small_config

from dreamerjax.config import keys as C
from dreamerjax.config import resolve as R
from dreamerjax.config.resolve import make_config
from dreamerjax.run import callbacks, driver, host_time, records, rundir, status
from dreamerjax.run import report as run_report
from dreamerjax.tools import args as cli_args
from dreamerjax.viz import report


def _report(dims: int, error_of=None, seed: int = 0) -> dict:
    """A host report of `dims` vector dimensions [B=2, T=16]; error_of(d) is dimension d's
    prediction offset on the imagined rows (default: none)."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(size=(2, 16, dims)).astype(np.float32)
    pred = truth.copy()
    if error_of is not None:
        pred[:, 4:] += np.asarray([error_of(d) for d in range(dims)], np.float32)
    return {"context": 4, "truth/vector": truth, "pred/vector": pred,
            "reward": np.zeros((2, 16)), "pred_reward": np.zeros((2, 16)),
            "cont": np.ones((2, 16)), "pred_cont": np.ones((2, 16))}


def test_panels_are_the_dimensions_with_the_largest_open_loop_error():
    worst = [997, 3, 500, 250, 12, 640, 71, 888]  # planted errors, largest first
    planted = {d: 1.0 - 0.1 * i for i, d in enumerate(worst)}
    rep = _report(1000, lambda d: planted.get(d, 0.01 * (d % 7) / 7))
    chosen = report.chosen_dims(rep, ["vector"])
    assert len(chosen) == report.VECTOR_PANELS == 8
    assert [d for _, d, _ in chosen] == worst
    assert [e for _, _, e in chosen] == pytest.approx([planted[d] for d in worst], rel=1e-5)
    # Observed rows do not count: an error only before the imagined rows is no error.
    rep["pred/vector"][:, :4, 5] += 100.0
    assert 5 not in [d for _, d, _ in report.chosen_dims(rep, ["vector"])]
    # No more dimensions than panels: all of them, in order.
    assert [d for _, d, _ in report.chosen_dims(_report(4), ["vector"])] == [0, 1, 2, 3]


def test_report_pictures_do_not_grow_with_the_observation(tmp_path):
    """1,000 dimensions draw the same pictures (pixel sizes) as 8 and 20: the panel grid
    holds at most VECTOR_PANELS dimensions plus reward and continue, and the heat map of
    every dimension has a fixed size."""
    import imageio.v3 as iio

    shapes = {}
    for dims in (8, 20, 1000):
        files = report.write_openl(_report(dims, lambda d: d / 1000), tmp_path / str(dims))
        assert sorted(p.name for p in files) == ["openl_vector.png",
                                                 "openl_vector_heatmap.png"]
        shapes[dims] = [iio.imread(p).shape for p in sorted(files)]
    assert shapes[1000] == shapes[20] == shapes[8]
    assert (tmp_path / "1000" / "openl_vector_heatmap.png").stat().st_size < 1_000_000


def test_status_line_says_what_is_known_before_the_first_update():
    recs = [records.record_row(s, 400, 0, [20.0 + s], [20], {"actor_loss": None}, None,
                               1.0, None) for s in (0, 1)]
    point = callbacks.LogPoint(0, 400, (0, 1), 16, recs, [], make_config(tiny=True))
    line = status.status_line(point, 0.0, {"dyn": 1.0})
    assert "nan" not in line
    assert line == ("[dreamerjax] rows 400 updates 0 eval_return 20.5 train_return n/a "
                    "(no update yet)")


def test_report_every_key_flag_and_schedule():
    config, _ = R.resolve(sets=["run.report_every_logs=3"])
    assert config.run.report_every == 3
    assert R.resolve(report_every=0)[0].run.report_every == 0
    with pytest.raises(C.ConfigError, match="counts log points"):
        R.resolve(sets=["run.report_every=300"])  # the reference's (e3f0224) is seconds
    with pytest.raises(C.ConfigError, match="run.report_every_logs: must be >= 0"):
        R.resolve(sets=["run.report_every_logs=-1"])
    due = [i for i in range(10)
           if run_report.should_report(make_config(tiny=True, report_every=4), i, 10)]
    assert due == [3, 7, 9]  # every 4th log point and the last
    assert not any(run_report.should_report(make_config(tiny=True, report_every=0), i, 10)
                   for i in range(10))


def test_phases_sum_what_ran_and_start_afresh():
    phases = host_time.Phases()
    with phases("report"):
        pass
    recs = [{"seed": 0}, {"seed": 1}]
    host_time.stamp(recs, phases, 12.5)
    every = host_time.PHASES + host_time.CHECKPOINT_PARTS
    assert set(recs[0]["host_s"]) == set(every)
    assert recs[0]["host_s"] == recs[1]["host_s"] and recs[0]["wall_s"] == 12.5
    assert phases.take() == dict.fromkeys(every, 0.0)


gymnasium = pytest.importorskip("gymnasium")


class Wide(gymnasium.Env):
    """1,000 observation dimensions, 2 actions; an episode lasts 40 steps."""

    observation_space = gymnasium.spaces.Box(-1, 1, (1000,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 1000).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 1000).astype(np.float32)
        return obs, float(action), False, self.t >= 40, {}


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory):
    from dreamerjax.envs.host.gym import register

    env = register("DreamerjaxWide-v0", Wide, max_episode_steps=40)
    out = tmp_path_factory.mktemp("wide")
    # The shared small run (tests/_runs.py) on this env: log points at rows 80, 160 and 240,
    # 55 updates by the last; report_every 0 is the contract under test (host-side only).
    cfg = small_config(env, report_every=0)
    recs = driver.train(cfg, (0,), str(out), progress=False).records
    return out, recs


def test_compile_clock_counts_compiles_not_runs():
    """The seconds left out of a log interval's updates/s: a program's first call traces
    and compiles it (counted), a second call of it only runs (nothing counted)."""
    import jax
    import jax.numpy as jnp

    clock = host_time.CompileClock()
    fn = jax.jit(lambda x: jnp.tanh(x) * 3.0 + x.sum())
    with clock:
        fn(jnp.ones((17, 5))).block_until_ready()
        assert clock.take() > 0
        fn(jnp.ones((17, 5))).block_until_ready()
        assert clock.take() == 0
    jax.jit(lambda x: x - 1)(jnp.ones(3))  # after leaving, nothing is listened to
    assert clock.take() == 0


def test_heartbeat_says_what_runs_where_no_bar_is_drawn(capsys):
    import time

    beat = host_time.Heartbeat(0.02)
    with beat:
        time.sleep(0.1)  # nothing said yet: no line
        assert capsys.readouterr().err == ""
        beat.say("compiling and training to row 160")
        deadline = time.time() + 30
        while "row 160" not in capsys.readouterr().err:
            assert time.time() < deadline, "no heartbeat line"
            time.sleep(0.05)
    capsys.readouterr()
    time.sleep(0.1)
    assert capsys.readouterr().err == ""  # stopped on exit
    with host_time.Heartbeat(0.02, enabled=False) as quiet:
        quiet.say("training")
        time.sleep(0.1)
    assert capsys.readouterr().err == ""


def test_a_notebook_gets_a_progress_bar(monkeypatch):
    """In a Jupyter kernel (stderr no terminal) train draws tqdm.auto's bar; in a job's
    log (no terminal, no kernel) none, the status and heartbeat lines alone."""
    import sys
    import types

    assert not status.in_notebook()
    assert status.progress_bar(True, 100, 0) is None  # pytest's stderr is no terminal
    shell = types.SimpleNamespace(kernel=object(), config={"IPKernelApp": {}})
    monkeypatch.setitem(sys.modules, "IPython",
                        types.SimpleNamespace(get_ipython=lambda: shell))
    assert status.in_notebook()
    bar = status.progress_bar(True, 100, 20)
    try:
        assert bar is not None and (bar.n, bar.total) == (20, 100)
    finally:
        bar.close()
    assert status.progress_bar(False, 100, 0) is None


def test_records_carry_host_seconds_and_report_every_zero_writes_no_report(wide_run):
    out, recs = wide_run
    assert recs[-1]["updates"] > 0  # a report could have been drawn
    assert not (out / "report").exists()
    before = 0.0
    for r in records.read_records(out):
        host = r["host_s"]
        assert set(host) == set(host_time.PHASES + host_time.CHECKPOINT_PARTS)
        assert all(v >= 0.0 for v in host.values()) and host["report"] == 0.0
        assert host["chunk"] > 0.0 and host["evaluate"] > 0.0
        # the phases ran inside the wall time since the previous record (the checkpoint's
        # parts are within it)
        parts = sum(host[k] for k in host_time.CHECKPOINT_PARTS)
        assert parts <= host["checkpoint"] + 1e-3
        assert sum(host.values()) - parts <= r["wall_s"] - before + 1e-3
        before = r["wall_s"]
    second = records.read_records(out)[1]["host_s"]
    assert second["checkpoint"] > 0.0  # the first's
    assert min(second[k] for k in host_time.CHECKPOINT_PARTS) > 0.0


def test_report_of_a_wide_run_is_bounded(wide_run, tmp_path):
    """`dreamerjax eval --report` on the 1,000-dimensional env: the same pictures as a
    report of 8 dimensions."""
    import imageio.v3 as iio

    out, _ = wide_run
    files = rundir.eval_artifacts(str(out), report=True)
    assert sorted(p.name for p in files) == ["openl_vector.png", "openl_vector_heatmap.png"]
    small = report.write_openl(_report(8), tmp_path)
    assert [iio.imread(p).shape for p in sorted(files)] == [
        iio.imread(p).shape for p in sorted(small)]


def test_video_writer_forks_no_python_under_jax(tmp_path):
    """The .mp4 writer starts ffmpeg without running Python in a forked child: JAX's
    at-fork warning (which a preexec_fn, as imageio's own writer passes, would raise)
    stays silent, and the video has every frame."""
    import os
    import subprocess
    import warnings

    import imageio.v3 as iio
    import jax

    from dreamerjax.viz import video

    jax.numpy.zeros(1).block_until_ready()  # JAX's backend (and its fork handler) is up
    with pytest.warns(RuntimeWarning, match=r"os\.fork\(\)"):  # the check can fail
        subprocess.run(["true"], preexec_fn=os.setpgrp, check=True)  # noqa: PLW1509
    frames = [np.full((33, 47, 3), 10 * t, np.uint8) for t in range(12)]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        path = video.write_video(tmp_path / "v.mp4", frames, fps=10)
    assert not [w for w in seen if "fork" in str(w.message)]
    with warnings.catch_warnings():  # the test's reader (imageio's ffmpeg) does fork
        warnings.simplefilter("ignore", RuntimeWarning)
        got = iio.imread(path)
    assert got.shape[0] == 12 and got.shape[1:3] == (34, 48)  # padded to even sizes


def test_summary_shows_where_the_wall_time_went(tmp_path):
    import json

    from dreamerjax.tools import summary

    run = tmp_path / "run"
    run.mkdir()
    with open(run / "records.jsonl", "w") as f:
        for i, rows in enumerate((400, 800)):
            for seed in (0, 1):
                rec = records.record_row(seed, rows, 0, [1.0], [10], {}, None, 0.0)
                rec["host_s"] = dict.fromkeys(host_time.PHASES, 0.0) | {
                    "chunk": 6.0 + i, "report": 2.0 * i}
                rec["wall_s"] = 10.0 * (i + 1)
                f.write(json.dumps(rec) + "\n")
    s = summary.summarize(run, last=1)
    assert [(e["rows"], e["interval_s"], e["chunk"], e["report"]) for e in s.host] == [
        (400, 10.0, 6.0, 0.0), (800, 10.0, 7.0, 2.0)]
    text = summary.markdown(s)
    assert "| 800 | 10.0 | 7.00 | 0.00 | 0.00 | 2.00 | 0.00 | 0.00 | 30% |" in text
    assert "| all | 20.0 | 13.00 | 0.00 | 0.00 | 2.00 | 0.00 | 0.00 | 35% |" in text
    assert summary.as_json(s)["host_s"][1]["report"] == 2.0


def test_report_every_flag(tmp_path):
    from dreamerjax.tools import cli

    args = cli.parse(["train", "--tiny", "--report-every", "3", "--out", str(tmp_path / "a")])
    assert cli_args.config_from_args(args.validate()).run.report_every == 3
    bad = cli.parse(["train", "--tiny", "--report-every", "-1", "--out", str(tmp_path / "b")])
    with pytest.raises(cli.ArgumentError,
                       match="--report-every: run.report_every_logs: must be >= 0"):
        cli.plan_of_args(bad.validate())  # the run's plan checks the config, once
    from dreamerjax.config import resolve as config_resolve

    # pictures only: a resume may change it
    assert "report_every" in config_resolve.resume_may_change()
