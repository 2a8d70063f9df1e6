"""The prepared GPU check (benchmarks/gpu_check.sh, benchmarks/gpu_check.py): the published
scores format read, interpolated and compared on a synthetic file in the reference's format
(never the reference's own), and the whole script in its SMOKE mode on this CPU: a tiny
two-seed Playground run, its curve compared with the synthetic curve, the one JSON; and
(slow) its data stage, benchmarks/data_parallel.py on 2 mock CPU devices, and its replay
stage, benchmarks/replay_memory.py (run.replay_memory host against device) on the CPU."""

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import _benchmarks
import pytest
from _xla import QUICK_CODEGEN

check = _benchmarks.load("gpu_check.py")
data_parallel = _benchmarks.load("data_parallel.py")
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def write_scores(path, runs):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(runs, f)
    return str(path)


def synthetic(path):
    """Three dreamerv3 runs of dmc_cartpole_balance, run k: y = 10 k + x / 2 at xs 0, 100,
    ..., 400; beside them runs of another task and another method, which must be left out."""
    xs = [0, 100, 200, 300, 400]
    runs = [{"task": check.TASK, "method": check.METHOD, "seed": k, "xs": xs,
             "ys": [10 * k + x / 2 for x in xs]} for k in (2, 0, 1)]
    runs += [{"task": "dmc_walker_walk", "method": check.METHOD, "seed": 0, "xs": [0, 400],
              "ys": [-1e3, -1e3]},
             {"task": check.TASK, "method": "ppo", "seed": 0, "xs": [0, 400],
              "ys": [1e4, 1e4]}]
    return write_scores(path, runs)


def test_scores_are_read_for_the_task_and_method_only(tmp_path):
    runs = check.read_scores(synthetic(tmp_path / "s.json.gz"))
    assert [r["seed"] for r in runs] == [0, 1, 2]
    assert runs[1]["ys"] == [10.0, 60.0, 110.0, 160.0, 210.0]
    with pytest.raises(ValueError, match="no run of task 'dmc_nosuch'.*dmc_walker_walk"):
        check.read_scores(tmp_path / "s.json.gz", task="dmc_nosuch")
    bad = write_scores(tmp_path / "b.json.gz", [{"task": check.TASK, "method": check.METHOD,
                                                 "seed": 0, "xs": [0, 0], "ys": [1, 2]}])
    with pytest.raises(ValueError, match="strictly increasing"):
        check.read_scores(bad)
    (tmp_path / "plain.json").write_text("[]")
    with pytest.raises(ValueError, match="not a gzip JSON scores file"):
        check.read_scores(tmp_path / "plain.json")


def test_interpolation_and_band_at_known_steps(tmp_path):
    runs = check.read_scores(synthetic(tmp_path / "s.json.gz"))
    assert check.interpolate([0, 100], [0, 50], 30) == pytest.approx(15)
    assert check.interpolate([100, 200], [1, 3], 200) == 3
    assert check.interpolate([100, 200], [1, 3], 99) is None  # no extrapolation
    assert check.interpolate([100, 200], [1, 3], 201) is None
    band = check.published_band(runs, [160, 320, 500])
    assert band[0] == {"env_steps": 160, "runs": 3, "mean": pytest.approx(90),
                       "min": pytest.approx(80), "max": pytest.approx(100)}
    assert (band[1]["mean"], band[1]["min"], band[1]["max"]) == pytest.approx((170, 160, 180))
    assert band[2] == {"env_steps": 500, "runs": 0, "mean": None, "min": None, "max": None}


def test_points_are_placed_against_the_published_range(tmp_path):
    runs = check.read_scores(synthetic(tmp_path / "s.json.gz"))
    records = [{"seed": s, "rows": rows, "eval_mean": v, "train_return": None}
               for s, vals in ((0, (70, 95, 0)), (1, (90, 300, 0)))
               for rows, v in zip((80, 160, 300), vals, strict=True)]
    curves = check.our_curves(records, repeat=2)
    assert curves["1"]["env_steps"] == [160, 320, 600]
    points = check.compare_points(curves, runs, "eval_mean")
    assert [p["position"] for p in points] == ["within", "above", None]
    assert points[0]["ours_mean"] == 80 and points[0]["seeds_within_range"] == 1
    assert points[1]["ours_mean"] == pytest.approx(197.5) and points[1]["ours_max"] == 300
    assert points[1]["within_published_range"] is False
    assert points[2]["within_published_range"] is None  # beyond the published xs
    assert check.summarize(points) == {
        "points": 3, "compared": 2, "below": 0, "within": 1, "above": 1, "not_compared": 1,
        "last_compared_env_steps": 320, "last_within_published_range": False}
    none = check.compare_points(curves, runs, "train_return")
    assert [p["position"] for p in none] == [None] * 3


def test_the_task_is_the_runs_env_unless_named(tmp_path):
    assert check.task_of({"run": {"env": "playground_CartpoleSwingup"}}) == \
        "dmc_cartpole_swingup"
    assert check.task_of({"run": {"env": "playground_CartpoleBalance"}}) == check.TASK
    assert check.task_of({"run": {"env": "dmc_walker_walk"}}) == "dmc_walker_walk"
    assert check.task_of({}) == check.TASK
    assert check.repeat_of({"run": {"env": "dmc_walker_walk"},
                            "env": {"dmc": {"repeat": 4}, "playground": {"repeat": 2}}}) == 4
    assert check.repeat_of({"run": {"env": "playground_CartpoleBalance"},
                            "env": {"dmc": {"repeat": 4}, "playground": {"repeat": 3}}}) == 3
    assert check.repeat_of({}) == 2
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": {"env": "dmc_walker_walk"}}))
    with gzip.open(run / "records.jsonl.gz", "wt") as f:  # read where only the .gz exists
        f.write(json.dumps({"seed": 0, "rows": 200, "eval_mean": 5.0}) + "\n")
    scores = synthetic(tmp_path / "s.json.gz")
    walker = check.compare_run(str(run), scores)
    assert walker["task"] == "dmc_walker_walk"
    assert walker["eval"]["points"][0]["published_mean"] == -1e3
    named = check.compare_run(str(run), scores, task=check.TASK)
    assert named["eval"]["points"][0]["ours"] == {"0": 5.0}
    assert named["eval"]["points"][0]["published_runs"] == 3


def test_the_plot_draws_a_comparison_in_256_colours(tmp_path):
    from PIL import Image

    runs = check.read_scores(synthetic(tmp_path / "s.json.gz"))
    records = [{"seed": s, "rows": rows, "eval_mean": 50.0 * s + rows / 4,
                "train_return": None if rows < 150 else 60.0} for s in (0, 1)
               for rows in (50, 100, 150)]
    curves = check.our_curves(records, repeat=2)
    comparison = {"task": check.TASK, **{
        name: {"points": check.compare_points(curves, runs, field)}
        for name, field in (("eval", "eval_mean"), ("train_episodes", "train_return"))}}
    check.plot_comparison(comparison, str(tmp_path / "c.png"))
    image = Image.open(tmp_path / "c.png")
    assert image.mode == "P" and image.size == (640, 380)
    assert len(image.getcolors(256)) > 4  # drawn, not blank


COMMITTED_DMC = ROOT / "results" / "dmc_cartpole_tpu"


@pytest.mark.parametrize("name", ["balance", "swingup", "swingup_dm_control_12m"])
def test_committed_dmc_comparison_holds_the_records_own_numbers(name):
    """The committed compare.json (the published band needs the reference's scores file,
    which is not kept here) has our side as the gzipped records give it, its task from the
    run's env, and its summary from its own points."""
    src = COMMITTED_DMC / name
    committed = json.loads((src / "compare.json").read_text())
    config = json.loads((src / "config.json").read_text())
    assert committed["task"] == check.task_of(config)
    curves = check.our_curves(check.read_jsonl(str(src / "records.jsonl")), repeat=2)
    for part, field in (("eval", "eval_mean"), ("train_episodes", "train_return")):
        points = committed[part]["points"]
        assert [p["env_steps"] for p in points] == curves["0"]["env_steps"]
        for i, p in enumerate(points):
            assert p["ours"] == {s: c[field][i] for s, c in curves.items()}
        assert committed[part]["summary"] == check.summarize(points)


def test_the_json_takes_the_data_stages_result_and_keeps_no_absolute_path(tmp_path):
    assert check.assemble(str(tmp_path), None, True, 60)["data_parallel"] is None
    (tmp_path / "data_parallel.json").write_text('{"runs": [], "speedup": {}}')
    assert check.assemble(str(tmp_path), None, True, 60)["data_parallel"] == {
        "runs": [], "speedup": {}}
    root = data_parallel.ROOT
    assert data_parallel.portable_argv(
        ["--tiny", "--out", str(tmp_path / "dp.json"), f"--out={root}/results/x.json",
         "--set", "batch_size=4"]) == [
        "benchmarks/data_parallel.py", "--tiny", "--out", "dp.json",
        "--out=results/x.json", "--set", "batch_size=4"]


def _run(out, tmp_path, **env):
    # The tiers' quick code generation (tests/_xla.py): the smoke's numbers are not what is
    # checked, and it compiles faster.
    env = os.environ | {"PYTHON": sys.executable, "PYTHONPATH": str(ROOT),
                        "TMPDIR": str(tmp_path), "XLA_FLAGS": QUICK_CODEGEN, **env}
    return subprocess.run(["bash", str(SCRIPT), str(out)], capture_output=True, text=True,
                          env=env, check=False, timeout=600)


def test_without_a_gpu_the_check_stops_after_the_devices(tmp_path):
    proc = _run(tmp_path / "out", tmp_path, SMOKE="0")
    assert proc.returncode == 2 and "no GPU backend" in proc.stderr, proc.stderr
    result = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert result["devices"]["backend"] == "cpu" and not result["smoke"]
    assert [(s["stage"], s["status"]) for s in result["stages"]] == [("devices", "ok")]
    assert result["train"] is None and result["comparison"] is None


def test_smoke_mode_trains_compares_and_writes_the_json(tmp_path):
    if importlib.util.find_spec("mujoco_playground") is None:
        pytest.skip("mujoco_playground not installed")
    out = tmp_path / "out"
    proc = _run(out, tmp_path, SMOKE="1", SCORES=synthetic(tmp_path / "s.json.gz"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu_check.json", "gpu_check_log.txt", "run_config.json", "run_episodes.jsonl",
        "run_records.jsonl"]
    result = json.loads((out / "gpu_check.json").read_text())
    assert result["smoke"] and result["devices"]["backend"] == "cpu"
    assert result["devices"]["playground_import_error"] is None
    assert [(s["stage"], s["status"]) for s in result["stages"]] == [
        ("devices", "ok"), ("bench", "skipped"), ("data", "skipped"), ("train", "ok"),
        ("replay", "skipped"), ("bench2", "skipped")]
    assert result["data_parallel"] is None
    train = result["train"]
    assert train["config"]["run"]["env"] == "playground_CartpoleBalance"
    assert train["config"]["seeds"] == [0, 1] and train["env_steps_per_row"] == 2
    records = [json.loads(line) for line in (out / "run_records.jsonl").read_text().splitlines()]
    evals = {(r["seed"], r["rows"]): r["eval_mean"] for r in records}
    for seed in ("0", "1"):
        curve = train["curves"][seed]
        assert curve["rows"] == [80, 160] and curve["env_steps"] == [160, 320]
        assert curve["eval_mean"] == [evals[(int(seed), 80)], evals[(int(seed), 160)]]
    cmp = result["comparison"]
    assert cmp["published_seeds"] == [0, 1, 2] and result["published"]["runs"] == 3
    for point, (mean, lo, hi) in zip(cmp["eval"]["points"], ((90, 80, 100), (170, 160, 180)),
                                     strict=True):
        assert (point["published_mean"], point["published_min"], point["published_max"]) \
            == pytest.approx((mean, lo, hi))
        ours = [evals[(s, point["rows"])] for s in (0, 1)]
        assert point["ours_mean"] == pytest.approx(sum(ours) / 2)
        assert point["within_published_range"] == (lo <= point["ours_mean"] <= hi)
    assert result["verdict"]["eval_points_compared"] == 2
    assert "MJX" in result["notes"]["playground_vs_dm_control"]


@pytest.mark.slow  # two tiny benches with their compile workers: ~6 minutes on 2 cores
def test_smoke_with_benches_and_a_train_stage_cut_short(tmp_path):
    """The benches' JSONs land in OUT and in the one JSON; a train stage killed at its
    limit (before its first log point) is recorded as a timeout with its log's end, and
    the stages after it still run."""
    if importlib.util.find_spec("mujoco_playground") is None:
        pytest.skip("mujoco_playground not installed")
    out = tmp_path / "out"
    proc = _run(out, tmp_path, SMOKE="1", BENCH_S="250", TRAIN_S="40",
                SCORES=synthetic(tmp_path / "s.json.gz"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "gpu_check.json").read_text())
    stages = {s["stage"]: s for s in result["stages"]}
    assert stages["bench"]["status"] == stages["bench2"]["status"] == "ok"
    assert stages["train"]["status"] == "timeout" and "log_tail" in stages["train"]
    for dtype in ("float32", "bfloat16"):
        bench = json.loads((out / f"bench_tiny_{dtype}.json").read_text())
        assert result["bench"][f"tiny_{dtype}"] == bench
        assert set(bench["seconds_per_update_per_seed"]) == {"1", "2"}
    assert result["train"] is None or result["train"]["log_points"] == 0


@pytest.mark.slow  # two tiny workers, each compiling its chunk: ~3 minutes on 2 shared cores
def test_smoke_data_stage_trains_one_seed_on_one_and_two_mock_devices(tmp_path):
    """The data stage alone (the train stage's limit 0): benchmarks/data_parallel.py on 2
    forced host devices, N = 1 and 2, its JSON in OUT and in the one JSON."""
    out = tmp_path / "out"
    proc = _run(out, tmp_path, SMOKE="1", DATA_S="400", TRAIN_S="0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "gpu_check.json").read_text())
    assert [(s["stage"], s["status"]) for s in result["stages"]] == [
        ("devices", "ok"), ("bench", "skipped"), ("data", "ok"), ("train", "skipped"),
        ("replay", "skipped"), ("bench2", "skipped")]
    data = json.loads((out / "data_parallel.json").read_text())
    assert result["data_parallel"] == data
    assert data["device_kinds"] == ["cpu", "cpu"] and "mock CPU devices" in data["note"]
    assert data["config"]["size"] == "tiny" and data["config"]["batch_size"] == 16
    assert not any(os.path.isabs(a) for a in data["argv"])
    assert data["commit"] == result["git_commit"]
    runs = {r["data_devices"]: r for r in data["runs"]}
    assert sorted(runs) == [1, 2], data["runs"]
    assert runs[1]["mesh"] is None and runs[2]["mesh"] == {"seed": 1, "data": 2}
    assert runs[2]["envs_per_device"] == runs[2]["batch_per_device"] == 8
    for r in runs.values():
        assert r["updates_per_s"] > 0 and r["rows_per_s"] > 0 and r["compile_seconds"] > 0
        assert r["compile_seconds_later_chunks"] == 0 and r["peak_rss_mib"] > 0
    assert set(data["speedup"]) == {"1", "2"} and data["speedup"]["1"] == 1


@pytest.mark.slow  # the tiny chunk compiled twice (device and host replay): ~5 min on 2 cores
def test_smoke_replay_stage_times_host_against_device_replay(tmp_path):
    """The replay stage alone on this CPU: benchmarks/replay_memory.py's JSON in OUT and in
    the one JSON, both arms timed, the host arm's rows in pinned host memory."""
    out = tmp_path / "out"
    proc = _run(out, tmp_path, SMOKE="1", REPLAY_S="500", TRAIN_S="0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "gpu_check.json").read_text())
    assert [(s["stage"], s["status"]) for s in result["stages"]] == [
        ("devices", "ok"), ("bench", "skipped"), ("data", "skipped"), ("train", "skipped"),
        ("replay", "ok"), ("bench2", "skipped")]
    replay = json.loads((out / "replay_memory.json").read_text())
    assert result["replay_memory"] == replay and replay["backend"] == "cpu"
    assert replay["arms"]["host"]["memory_kinds_of_rows"] == ["pinned_host"]
    assert replay["arms"]["device"]["memory_kinds_of_rows"] == ["device"]
    assert replay["host_over_device"] > 0 and not os.path.isabs(replay["command"].split()[0])
    assert "--out" not in replay["command"]
