"""Training on host envs through the compiled driver (dreamerjax/host_loop.py)."""

from __future__ import annotations

import pytest

gymnasium = pytest.importorskip("gymnasium")

from _runs import at_head, small_config  # noqa: E402

from dreamerjax.config.defaults import HEAD_REF, REF_29EB964  # noqa: E402
from dreamerjax.config.resolve import make_config  # noqa: E402
from dreamerjax.envs.host import base as host_lib  # noqa: E402
from dreamerjax.envs.host.gym import register  # noqa: E402
from dreamerjax.run import checkpoint as ckpt  # noqa: E402
from dreamerjax.run import driver, records  # noqa: E402
from dreamerjax.run.setup import make_setup  # noqa: E402


def _cfg(env="gym_CartPole-v1"):
    """The tests' small run (tests/_runs.py) on a host env: 8 envs, log points at rows
    80 / 160 / 240, a replay ring of 64 rows per env."""
    return small_config(env)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("host_cartpole"))
    recs = driver.train(_cfg(), (0, 1), out, progress=False,
                        tensorboard=False).records
    return out, recs


def test_host_cartpole_schedule_records_and_episodes(cartpole_run):
    out, recs = cartpole_run
    # The compiled path's schedule (tests/_runs.py): the gate opens at row 132, so no
    # update at row 80, then 1 + (rows - 132) // 2: 15 at row 160 and 55 at row 240.
    assert [(r["seed"], r["rows"], r["updates"]) for r in recs] == [
        (0, 80, 0), (1, 80, 0), (0, 160, 15), (1, 160, 15), (0, 240, 55), (1, 240, 55)]
    for r in recs:
        assert len(r["eval_returns"]) == 2 and all(1 <= x <= 500 for x in r["eval_returns"])
        assert r["eval_lengths"] == r["eval_returns"]  # CartPole: reward 1 per step
    assert recs[-1]["train"]["opt_loss"] is not None
    eps = records.read_episodes(out)
    assert {e["seed"] for e in eps} == {0, 1}
    assert {e["worker"] for e in eps} <= set(range(8))
    # CartPole-v1 episodes end by termination (random policies fall long before 500).
    assert all(e["terminal"] and e["score"] == e["length"] for e in eps)
    per_worker = {}
    for e in eps:  # rows of one worker: an episode of L steps spans L + 1 rows
        prev = per_worker.get((e["seed"], e["worker"]), -1)
        assert e["row_last"] - e["length"] > prev
        per_worker[(e["seed"], e["worker"])] = e["row_last"]
    assert ckpt.latest_verified(out) is not None


def test_seeds_have_their_own_envs(cartpole_run):
    out, _ = cartpole_run
    eps = records.read_episodes(out)
    first = {s: [e["length"] for e in eps if e["seed"] == s][:8] for s in (0, 1)}
    assert first[0] != first[1]


class FailingCartPole(gymnasium.Env):
    """CartPole whose step raises once `armed` (a callback arms it at the first log point,
    so the training envs fail in the second log interval)."""

    armed = False

    def __init__(self):
        self.inner = gymnasium.make("CartPole-v1")
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space

    def reset(self, seed=None, options=None):
        return self.inner.reset(seed=seed)

    def step(self, action):
        if FailingCartPole.armed:
            raise RuntimeError("the simulator crashed")
        return self.inner.step(action)


class ArmFailure:
    name = "arm_failure"

    def on_log(self, point):
        FailingCartPole.armed = True

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_env_that_raises_stops_the_run_and_keeps_the_checkpoint(tmp_path):
    env_id = register("DreamerjaxFailingCartPole-v0", FailingCartPole, max_episode_steps=500)
    out = str(tmp_path / "run")
    FailingCartPole.armed = False
    try:
        # Seeds 0 and 1 as cartpole_run: the same spaces and seeds, so the same programs
        # (from the session's compilation cache).
        with pytest.raises(host_lib.EnvWorkerError, match="the simulator crashed"):
            driver.train(_cfg(env=env_id), (0, 1), out, progress=False,
                         tensorboard=False, callbacks=[ArmFailure()])
    finally:
        FailingCartPole.armed = False
    found = ckpt.latest_verified(out)
    assert found is not None and found[1]["rows"] == 80  # the first log point's
    assert [r["rows"] for r in records.read_records(out)] == [80, 80]  # of seeds 0 and 1


def test_host_setup_is_checked_before_compiling(tmp_path):
    setup = make_setup(_cfg())
    assert setup.spaces.obs == (("vector", (4,), "float32"),)
    # the ring: run.replay_capacity of the small run, 64 rows per env
    assert setup.spec.episode_limit == 500 and setup.capacity == 64
    with pytest.raises(ValueError, match="NoSuchEnv"):
        make_setup(_cfg(env="gym_NoSuchEnv-v0"))
    with pytest.raises(ValueError, match="devices"):
        driver.train(_cfg(), (0, 1), str(tmp_path / "x"), devices=2, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("reference", [REF_29EB964, HEAD_REF])
@pytest.mark.parametrize("env_id, settings, extra", [
    ("atari100k_pong", {}, "ale_py"),
    ("dmc_cartpole_swingup", {}, "dm_control"),
    ("dmc_cartpole_swingup", {"image": False}, "dm_control"),
    ("crafter_reward", {}, "crafter"),
    ("gym_CartPole-v1", {}, "gymnasium"),
    ("procgen_coinrun", {}, "procgen"),
    ("bsuite_catch/0", {}, "bsuite"),
    ("memmaze_9x9", {}, "memory_maze"),
])
def test_tiny_runs_of_the_reference_suites(tmp_path, env_id, settings, extra, reference):
    """A few hundred rows with two seeds on each suite (images through the CNN), with each
    reference version's agent and suite settings."""
    import dataclasses

    pytest.importorskip(extra)
    # Small batches and few envs: a few hundred rows of each suite, two seeds, quickly.
    cfg = make_config(env_id, tiny=True, steps=320, eval_every=160, eval_episodes=1,
                      num_envs=2, episode_limit=60, batch_size=2, batch_length=16,
                      train_ratio=8)
    if reference == HEAD_REF:
        cfg = at_head(cfg)
    if settings:
        suite = env_id.split("_")[0]
        section = dataclasses.replace(getattr(cfg.env, suite), **settings)
        cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, **{suite: section}))
    out = str(tmp_path / "run")
    recs = driver.train(cfg, (0, 1), out, progress=False,
                        tensorboard=False).records
    assert [r["rows"] for r in recs] == [160, 160, 320, 320]
    assert recs[-1]["updates"] > 0 and recs[-1]["updates"] == recs[-2]["updates"]
    assert all(len(r["eval_returns"]) == 1 for r in recs)
    eps = records.read_episodes(out)
    assert eps  # the time limit of 60 steps ends episodes
    if env_id.startswith("crafter"):  # achievements per episode, as the reference logs them
        assert all("log_achievement_wake_up" in e and "log_reward" in e for e in eps)


def test_eval_video_of_a_host_env(cartpole_run, tmp_path, monkeypatch):
    """`dreamerjax eval RUN --video out.mp4` on gym_CartPole-v1: Gymnasium's own rgb_array
    pictures, one frame per row of the episode (reset row first), the return in the
    corner."""
    pytest.importorskip("pygame")  # Gymnasium's CartPole draws with it (the gym extra)
    import imageio.v3 as iio

    from dreamerjax.tools import cli
    from dreamerjax.viz import video

    out, _ = cartpole_run
    seen = {}
    write = video.write_video

    def spy(path, images, fps=30):
        seen["images"] = images
        return write(path, images, fps)

    monkeypatch.setattr(video, "write_video", spy)
    path = tmp_path / "episode.mp4"
    assert cli.main(["eval", out, "--episodes", "1", "--video", str(path)]) == 0
    frames = iio.imread(path)
    n = len(seen["images"])
    assert 2 <= n <= 501  # an episode of L <= 500 steps: L + 1 rows
    assert frames.shape == (n, 256, 384, 3)  # CartPole's 600 x 400, 256 high
    assert frames.std() > 10  # a picture, not a blank
    # Gymnasium's picture: a white background with the cart drawn on it.
    assert (seen["images"][0][128:] > 240).mean() > 0.5


def test_driver_parallel_flag_steps_in_worker_processes(tmp_path, monkeypatch):
    """`--driver-parallel` (run.driver_parallel) gives each host env a worker process; the
    rows are those of the in-process run; the flag may change on --resume."""
    import json

    from dreamerjax.tools import cli

    made = []
    vector = host_lib.HostVector

    class Spy(vector):
        def __init__(self, factories, parallel=False, timeout=300.0):
            made.append(bool(parallel))
            super().__init__(factories, parallel=parallel, timeout=timeout)

    monkeypatch.setattr(host_lib, "HostVector", Spy)
    base = ["train", "--env", "gym_CartPole-v1", "--tiny", "--seeds", "0", "--steps", "160",
            "--eval-every", "80", "--eval-episodes", "1", "--num-envs", "2",
            "--no-compile-cache", "--set", "run.train_fill=100000",  # no update to compile
            "--set", "wrapper.length=20"]  # short evaluation episodes
    runs = {}
    for name, extra in (("inproc", []), ("workers", ["--driver-parallel"])):
        out = tmp_path / name
        assert cli.main([*base, "--out", str(out), *extra]) == 0
        runs[name] = out
    assert made == [False, False, True, True]  # training and evaluation envs of each run
    saved = json.loads((runs["workers"] / "config.json").read_text())
    assert saved["run"]["driver_parallel"] is True
    assert records.read_episodes(str(runs["inproc"])) == records.read_episodes(
        str(runs["workers"]))
    assert [r["eval_returns"] for r in records.read_records(str(runs["inproc"]))] == [
        r["eval_returns"] for r in records.read_records(str(runs["workers"]))]
    args = cli.parse(["train", "--resume", str(runs["inproc"]), "--driver-parallel"])
    config, _ = cli.resume_config(args.validate())
    assert config.run.driver_parallel is True
