"""Videos at log points (`--video-every`, run.video_every_logs; run/videos.py) on the real
packages: the shared small two-seed run (tests/_runs.py) with a video at every log point
leaves an mp4 per seed and log point in RUN/videos, a TensorBoard animation, a W&B video
in each seed's offline run and an MLflow artifact in each seed's child run; the video is
the evaluation's first episode (its length and return those of the records); and the
run's records and episodes are those of the same run without videos. Then a host env's
(Gymnasium, rendered by Gymnasium), and the refusals: a negative count, and an env that
cannot render, each one line naming the flag before anything compiles."""

import dataclasses
import importlib.util
import os
import struct
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import jax
import numpy as np
import pytest
from _runs import offline_loggers, small_argv, small_config, without_timing

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config import resolve as config_resolve
from dreamerjax.config.defaults import LoggerConfig
from dreamerjax.run import driver, outputs, records, videos
from dreamerjax.run import plan as plan_lib
from dreamerjax.tools import args as cli_args

SEEDS = (0, 1)
ROWS = [80, 160, 240]  # the small run's log points (tests/_runs.py)
KW = dict(progress=False)


def _frames(path: Path) -> np.ndarray:
    """An mp4's frames [T, H, W, 3], decoded by imageio-ffmpeg's ffmpeg into PNG files
    (started without a preexec_fn, as viz/video.py starts it: no fork handler runs beside
    JAX's threads)."""
    import tempfile

    import imageio_ffmpeg

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-i",
                        str(path), str(Path(tmp) / "%05d.png")], check=True)
        return np.stack([iio.imread(f) for f in sorted(Path(tmp).glob("*.png"))])


def _stacked(result) -> dict:
    """The policy params [seeds, ...] a TrainResult ends with (its last log point's)."""
    params = jax.tree.map(lambda *x: np.stack(x), *[result.params[s] for s in result.seeds])
    return agent_lib.policy_params(result.config.agent, params)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The small run with a video at every log point and every output on (W&B offline,
    MLflow in its store under the run directory), and the same run without videos. The
    first is stopped after row 160 before any checkpoint (its only one is the last log
    point's) and resumed: the resume plays rows 80 and 160 again, whose videos the outputs
    had, and must not get them twice."""
    root = tmp_path_factory.mktemp("videos")
    # W&B and MLflow where their extras are installed (`make test` has the dev extra only;
    # CI installs both): their own tests skip without them, the videos' run goes on
    every = ("jsonl", "tensorboard", *(name for name in ("wandb", "mlflow")
                                       if importlib.util.find_spec(name) is not None))
    config = dataclasses.replace(small_config(video_every=1, checkpoint_every=3),
                                 logger=LoggerConfig(outputs=every))
    with offline_loggers():
        driver.train(config, SEEDS, str(root / "on"), stop_after_rows=160, **KW)
        assert not (root / "on" / "checkpoints").exists() or not any(
            (root / "on" / "checkpoints").iterdir())
        assert len(list((root / "on" / "videos").rglob("*.mp4"))) == 4  # rows 80, 160
        on = driver.train(config, SEEDS, str(root / "on"), resume=True, **KW)
    off = driver.train(small_config(), SEEDS, str(root / "off"), **KW)
    return root / "on", on, root / "off", off


def test_a_video_per_seed_and_log_point_is_the_evaluations_first_episode(runs):
    out, result, _, _ = runs
    recs = records.read_records(out)
    assert [r["rows"] for r in recs] == [r for r in ROWS for _ in SEEDS]
    found = sorted(p.relative_to(out).as_posix() for p in (out / "videos").rglob("*"))
    assert found == ["videos/seed_0", *(f"videos/seed_0/point_{k}.mp4" for k in range(3)),
                     "videos/seed_1", *(f"videos/seed_1/point_{k}.mp4" for k in range(3))]
    for r in recs:
        frames = _frames(videos.path(out, r["seed"], ROWS.index(r["rows"])))
        # the reset row, then one frame per step of the evaluation's first episode
        assert frames.shape == (r["eval_lengths"][0] + 1, 256, 256, 3)
        assert frames.dtype == np.uint8 and frames.std() > 0
    # The episode itself, played again from the last log point's keys: the evaluation's
    # first episode, return and length, for each seed.
    plan = plan_lib.make_plan(result.config, SEEDS)
    episodes = videos.LogVideos(plan, out).episodes(_stacked(result), len(ROWS) - 1)
    for seed, episode in zip(SEEDS, episodes, strict=True):
        last = [r for r in recs if r["seed"] == seed][-1]
        live = ~episode["done"][1:]
        assert float(episode["reward"][1:][live].sum()) == last["eval_returns"][0]
        assert int(live.sum()) == last["eval_lengths"][0]


def test_videos_change_nothing_in_the_records(runs):
    on, _, off, _ = runs
    assert [without_timing(r) for r in records.read_records(on)] == \
        [without_timing(r) for r in records.read_records(off)]
    assert records.read_episodes(on) == records.read_episodes(off)
    assert not (off / "videos").exists()
    # the video's seconds are a phase of their own, only where videos are made
    assert all("video" in r["host_s"] for r in records.read_records(on))
    assert not any("video" in r["host_s"] for r in records.read_records(off))


def _tb_videos(run_dir: Path) -> dict[int, list[tuple[int, bytes]]]:
    """(step, encoded image) of every eval/video summary, per seed (TFRecord framing read
    with tensorboardX's protobuf, as tests/_runs.read_scalars)."""
    from tensorboardX.proto import event_pb2

    out = {}
    for seed_dir in sorted((run_dir / records.TB_DIR).glob("seed_*")):
        got = out.setdefault(int(seed_dir.name.split("_")[1]), [])
        for path in sorted(seed_dir.glob("events.out.tfevents.*")):
            data, pos = path.read_bytes(), 0
            while pos + 12 <= len(data):
                (length,) = struct.unpack("<Q", data[pos:pos + 8])
                event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
                pos += 12 + length + 4
                got += [(int(event.step), v.image.encoded_image_string)
                        for v in event.summary.value if v.tag == outputs.VIDEO_KEY]
    return out


def test_tensorboard_holds_each_video_as_an_animation(runs):
    out, _, _, _ = runs
    found = _tb_videos(out)
    assert sorted(found) == list(SEEDS)
    for seed, points in found.items():
        assert [step for step, _ in points] == ROWS
        for k, (_, gif) in enumerate(points):
            assert gif[:6] == b"GIF89a"
            frames = iio.imread(gif, index=None, extension=".gif")
            mp4 = _frames(videos.path(out, seed, k))
            # every frame, at half the mp4's size (videos.TB_STRIDE)
            assert frames.shape[:3] == (len(mp4), 128, 128) and frames.shape[-1] in (3, 4)


def test_wandb_gets_each_seeds_video_in_its_own_run(runs):
    pytest.importorskip("wandb")
    from test_outputs import _wandb_run

    out, _, _, _ = runs
    ids = outputs.read_state(out)["wandb"]["ids"]
    for seed in SEEDS:
        seen = _wandb_run(out, ids[str(seed)])
        media = [h for h in seen["history"] if f"{outputs.VIDEO_KEY}/_type" in h]
        assert [h["_step"] for h in media] == ROWS
        assert {h[f"{outputs.VIDEO_KEY}/_type"] for h in media} == {"video-file"}
        for h in media:  # the file W&B keeps in its offline run directory
            kept = list(out.glob(f"wandb/offline-run-*-{ids[str(seed)]}/files/"
                                 f"{h[f'{outputs.VIDEO_KEY}/path']}"))
            assert len(kept) == 1 and kept[0].suffix == ".mp4"
            assert _frames(kept[0]).shape[1:] == (256, 256, 3)


def test_mlflow_keeps_each_seeds_videos_as_artifacts_of_its_child_run(runs):
    mlflow = pytest.importorskip("mlflow")
    out, _, _, _ = runs
    state = outputs.read_state(out)["mlflow"]
    client = mlflow.MlflowClient(tracking_uri=state["uri"])
    for seed in SEEDS:
        child = state["children"][str(seed)]
        listed = [f.path for f in client.list_artifacts(child, "videos")]
        assert listed == [f"videos/point_{k}.mp4" for k in range(len(ROWS))]
        local = client.download_artifacts(child, "videos/point_2.mp4", str(out / "dl"))
        assert Path(local).read_bytes() == videos.path(out, seed, 2).read_bytes()
    # the parent run holds no log point's video (the curves and the report are its own)
    assert "videos" not in {f.path for f in client.list_artifacts(state["parent"])}


def test_a_host_envs_video_is_its_own_picture_of_the_evaluations_first_episode(tmp_path):
    pytest.importorskip("gymnasium")
    pytest.importorskip("pygame")  # Gymnasium's CartPole draws with it (the gym extra)
    config = small_config("gym_CartPole-v1", steps=80, video_every=1)
    result = driver.train(config, (0,), str(tmp_path), tensorboard=False, **KW)
    (rec,) = records.read_records(tmp_path)
    frames = _frames(videos.path(tmp_path, 0, 0))
    # Gymnasium's 600 x 400 picture, 256 high; the reset row and every step
    assert frames.shape == (rec["eval_lengths"][0] + 1, 256, 384, 3)
    plan = plan_lib.make_plan(result.config, (0,))
    log = videos.LogVideos(plan, tmp_path)
    try:
        (episode,) = log.episodes(_stacked(result), 0)
    finally:
        log.close()
    assert float(episode["reward"].sum()) == rec["eval_returns"][0]
    assert len(episode["frame"]) == rec["eval_lengths"][0] + 1


def test_video_every_key_flag_and_schedule(tmp_path):
    from dreamerjax.tools import cli

    assert config_resolve.resolve(sets=["run.video_every_logs=3"])[0].run.video_every == 3
    assert config_resolve.resolve()[0].run.video_every == 0  # off by default
    args = cli.parse(["train", "--tiny", "--video-every", "2", "--out", str(tmp_path / "a")])
    config = cli_args.config_from_args(args.validate())
    assert [i for i in range(6) if videos.due(config, i)] == [1, 3, 5]
    assert "video_every" in config_resolve.resume_may_change()  # host-side only


def _train_cli(argv, env=None):
    return subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", "train", *argv],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_a_negative_count_is_refused_in_one_line_naming_the_flag(tmp_path):
    done = _train_cli([*small_argv(), "--video-every", "-1", "--out", str(tmp_path / "r")])
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == ("dreamerjax train: error: --video-every: run.video_every_logs: "
                         "must be >= 0, got -1")
    assert not (tmp_path / "r").exists()


def test_an_env_that_cannot_render_is_refused_in_one_line_before_compiling(tmp_path):
    """DeepMind Control with MuJoCo's rendering turned off (MUJOCO_GL=disable, dm_control's
    own switch) and its image observation off: the env runs, its camera cannot."""
    pytest.importorskip("dm_control")
    done = _train_cli([*small_argv(80), "--env", "dmc_cartpole_balance",
                       "--set", "env.dmc.image=False", "--video-every", "1",
                       "--out", str(tmp_path / "r")], env={"MUJOCO_GL": "disable"})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dreamerjax train: error: --video-every (run.video_every_logs): "
                           "dmc_cartpole_balance cannot render (")
    assert last.endswith("--video-every 0 turns videos off")
    assert "compiling" not in done.stderr and not (tmp_path / "r").exists()


def test_a_gymnasium_picture_makes_no_noise_on_stderr(tmp_path):
    """Drawing a Gymnasium env's picture (what --video-every checks before compiling and
    draws at its log points; pygame inits SDL) writes nothing to stderr where the machine
    has no sound card or runtime directory: SDL's audio and window drivers are its dummy
    ones while the picture inits pygame, and the caller's SDL variables are as they were."""
    pytest.importorskip("gymnasium")
    pytest.importorskip("pygame")
    code = """if True:
        import os
        import numpy as np
        from dreamerjax.config.resolve import make_config
        from dreamerjax.run import rollout
        from dreamerjax.viz import video

        config = make_config("gym_CartPole-v1")
        for _ in range(2):  # closed and made again, as the start's check and a log point
            env = rollout.render_env(config)
            obs = env.reset(seed=0)
            picture = video.picture(env, {"obs": {k: np.asarray(v)[None]
                                                  for k, v in obs.items()}})
            env.close()
        assert picture.shape == (400, 600, 3) and picture.std() > 0, picture.shape
        assert "SDL_AUDIODRIVER" not in os.environ and "SDL_VIDEODRIVER" not in os.environ
    """
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "SDL_AUDIODRIVER", "SDL_VIDEODRIVER", "DISPLAY")}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for noise in ("XDG_RUNTIME_DIR", "ALSA lib", "Unknown PCM"):
        assert noise not in done.stderr, done.stderr
