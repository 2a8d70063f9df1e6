"""The reference's suites on real instances: Atari (ale-py), DMC (dm_control), Crafter."""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest

from dreamerjax.envs.host import base as host

# ----------------------------------------------------------------------------- Atari


def _raw_ale(seed_env):
    """A second ALE on the same ROM and seed as `seed_env` (sticky off: deterministic)."""
    import ale_py
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setInt("random_seed", int(np.random.default_rng(5).integers(0, 2 ** 31)))
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(seed_env._rom)
    ale.reset_game()
    return ale


def _expected_frame(frames, size, gray):
    """Max over the frames, pillow bilinear resize to size [H, W], then gray weights."""
    from PIL import Image
    image = np.amax(np.stack(frames), 0)
    image = np.array(Image.fromarray(image).resize(size[::-1], Image.BILINEAR))
    if gray:
        weights = np.array([0.299, 0.587, 1 - (0.299 + 0.587)])  # atari.py:12, not 0.114
        image = (image * weights).sum(-1).astype(np.uint8)[..., None]
    return image


def test_atari_pong_frames_pooled_and_resized():
    pytest.importorskip("ale_py")
    from dreamerjax.envs.host.atari import AtariEnv
    env = AtariEnv("pong", sticky=False, sticky_literal=True, size=(64, 48))
    assert env.spec.obs_space == (("image", (64, 48, 1), "uint8"),)
    assert env.spec.num_actions == 18 and env.spec.episode_limit == 27000
    obs = env.reset(seed=5)
    ale = _raw_ale(env)
    screen = ale.getScreenRGB()
    np.testing.assert_array_equal(obs["image"], _expected_frame([screen], (64, 48), True))
    rng = np.random.default_rng(0)
    pooled_differs = 0
    for _ in range(60):
        a = int(rng.integers(18))
        obs, reward, term, trunc, _ = env.step(a)
        frames, want = [], 0.0
        for _k in range(4):
            want += ale.act(ale.getLegalActionSet()[a])
            frames.append(ale.getScreenRGB())
        np.testing.assert_array_equal(obs["image"],
                                      _expected_frame(frames[-2:], (64, 48), True))
        assert reward == want and not term and not trunc
        pooled_differs += not np.array_equal(
            _expected_frame(frames[-2:], (64, 48), True),
            _expected_frame(frames[-1:], (64, 48), True))
    assert pooled_differs > 10  # the max over two frames matters (the ball moves)


def test_atari100k_colour_and_settings():
    pytest.importorskip("ale_py")
    env = host.make_host_env("atari100k_pong")
    assert env.spec.obs_space == (("image", (64, 64, 3), "uint8"),)
    assert not env.sticky and env.length == 100000 and env.pooling == 2
    assert not env.sticky_literal  # the reference's: ALE's default 0.25 acts
    assert env.ale.getFloat("repeat_action_probability") == 0.25
    literal = host.make_host_env("atari100k_pong", sticky_literal=True)
    assert literal.ale.getFloat("repeat_action_probability") == 0.0
    assert host.make_host_env("atari_pong").ale.getFloat("repeat_action_probability") == 0.25


def _first_action_delays(env, trials):
    """From one state, press RIGHT for 4 frames `trials` times; classify each outcome by
    how many frames the previous action (NOOP) stuck before RIGHT took effect."""
    import ale_py
    A = ale_py.Action
    ale = env.ale
    for _ in range(60):
        ale.act(A.NOOP)
    start = ale.cloneState()
    det = _raw_ale(env)
    for _ in range(60):
        det.act(A.NOOP)
    det_start = det.cloneState()
    outcome = {}
    for d in range(5):
        det.restoreState(det_start)
        for j in range(4):
            det.act(A.NOOP if j < d else A.RIGHT)
        outcome.setdefault(bytes(det.getRAM()), d)
    # Delays 0, 1, 2 are told apart by the RAM; a RIGHT on the last frame alone does not
    # show yet, so 3 means "3 or 4".
    assert sorted(outcome.values()) == [0, 1, 2, 3]
    counts = collections.Counter()
    for _ in range(trials):
        for _ in range(12):  # make NOOP the previous action again (0.25 ** 12 odds)
            ale.act(A.NOOP)
        ale.restoreState(start)
        for _ in range(4):
            ale.act(A.RIGHT)
        counts[outcome[bytes(ale.getRAM())]] += 1
    return counts


@pytest.mark.parametrize("sticky", [True, False])
def test_atari_sticky_actions_statistically(sticky):
    """sticky=False as the reference sets it (after the ROM loads) still repeats at ALE's
    default rate; only sticky_literal=True turns the repeats off."""
    pytest.importorskip("ale_py")
    from dreamerjax.envs.host.atari import AtariEnv
    env = AtariEnv("pong", sticky=sticky)
    env.reset(seed=5)
    n = 1000
    counts = _first_action_delays(env, n)
    # Each frame keeps the previous action with p = 0.25: delay d ~ Geometric, P(0) = 0.75,
    # P(1) = 0.1875 (4 binomial standard deviations either side).
    for d, p in ((0, 0.75), (1, 0.1875)):
        sd = np.sqrt(p * (1 - p) / n)
        assert abs(counts[d] / n - p) < 4 * sd, (d, counts)
    plain = AtariEnv("pong", sticky=False, sticky_literal=True)
    plain.reset(seed=5)
    assert _first_action_delays(plain, 50) == {0: 50}


def test_atari_lives():
    pytest.importorskip("ale_py")
    from dreamerjax.envs.host.atari import AtariEnv
    results = {}
    for lives in ("unused", "reset"):
        env = AtariEnv("breakout", sticky=False, sticky_literal=True, lives=lives)
        env.reset(seed=1)
        start = env.ale.lives()
        for t in range(1, 400):  # noqa: B007 - t is read after the loop
            _, _, term, trunc, _ = env.step(1)  # FIRE: launch, then let the ball drop
            if term or trunc or env.ale.lives() < start - 1:
                break
        results[lives] = (t, term, trunc, env.ale.lives(), start)
    t_reset, term, trunc, lives_left, start = results["reset"]
    assert term and not trunc and lives_left == start - 1 > 0  # a lost life ends it
    t_unused, term, trunc, lives_left, _ = results["unused"]
    assert not term and not trunc and lives_left == start - 2 and t_unused > t_reset
    with pytest.raises(ValueError, match="env.atari.lives='discount'"):
        AtariEnv("breakout", lives="discount")


def test_atari_noops_vary_the_reset_and_time_limit_is_a_truncation():
    pytest.importorskip("ale_py")
    from dreamerjax.envs.host.atari import AtariEnv
    env = AtariEnv("pong", sticky=False, sticky_literal=True, noops=30, length=40)
    counts = []
    for s in range(8):  # a uniform number of NOOP frames in [0, 30] after each reset
        env.reset(seed=s)
        counts.append(env.ale.getEpisodeFrameNumber())
    assert len(set(counts)) > 3 and 0 <= min(counts) and max(counts) <= 30
    env.reset(seed=0)
    assert env.ale.getEpisodeFrameNumber() == counts[0]  # seeded
    for t in range(1, 20):  # noqa: B007 - t is read after the loop
        _, _, term, trunc, _ = env.step(0)
        if term or trunc:
            break
    assert (t, term, trunc) == (10, False, True)  # 40 frames at repeat 4


# ----------------------------------------------------------------------------- DMC


def _dmc_with_images():
    """DMCEnv("cartpole_swingup"), or a skip when MuJoCo finds no OpenGL to render with
    (Mesa's EGL is a system package: .ci/run installs it)."""
    pytest.importorskip("dm_control")
    os.environ.setdefault("MUJOCO_GL", "egl")
    from dreamerjax.envs.host.dmc import DMCEnv
    env = DMCEnv("cartpole_swingup")
    try:
        env.physics.render(8, 8, camera_id=0)
    except Exception as e:  # noqa: BLE001 - the GL stack fails in several ways
        pytest.skip(f"MuJoCo cannot render with MUJOCO_GL={os.environ['MUJOCO_GL']}: {e}")
    return env


def test_dmc_cartpole_swingup_repeat_and_image():
    env = _dmc_with_images()
    from dm_control import suite
    assert env.spec.obs_space == (("position", (3,), "float32"),
                                  ("velocity", (2,), "float32"),
                                  ("image", (64, 64, 3), "uint8"))
    assert env.spec.action_dims == 1 and env.spec.episode_limit == 500
    raw = suite.load("cartpole", "swingup", task_kwargs={"random": 3})
    obs = env.reset(seed=3)
    ts = raw.reset()
    np.testing.assert_array_equal(obs["position"], ts.observation["position"].astype(np.float32))
    assert obs["image"].dtype == np.uint8 and obs["image"].std() > 0
    np.testing.assert_array_equal(obs["image"], raw.physics.render(64, 64, camera_id=0))
    for a in (0.5, -1.0, 0.25):
        obs, reward, term, trunc, _ = env.step(np.array([a], np.float32))
        want = 0.0
        for _ in range(2):  # action repeat 2: float32 step rewards summed in float64
            ts = raw.step(np.array([a]))
            want += float(np.float32(ts.reward))
        np.testing.assert_array_equal(obs["velocity"],
                                      ts.observation["velocity"].astype(np.float32))
        assert reward == float(np.float32(want)) and not term and not trunc


def test_dmc_proprio_time_limit_is_a_truncation():
    pytest.importorskip("dm_control")
    env = host.make_host_env("dmc_cartpole_swingup", image=False)
    assert env.spec.image_keys() == ()
    col = host.HostCollector(host.HostVector([lambda: env]))
    col.reset([0])
    for t in range(1, 600):  # noqa: B007 - t is read after the loop
        rows, ends = col.step(np.zeros((1, 1), np.float32))
        if rows["is_last"][0]:
            break
    assert t == 500 and not rows["is_terminal"][0] and ends.length[0] == 500


def test_dmc_proprio_runs_with_rendering_disabled():
    """MUJOCO_GL=disable (dm_control's no-renderer setting, docs/environments.md): a
    proprioceptive env steps with no OpenGL loaded, in a fresh process where the setting is
    read at dm_control's import."""
    import subprocess
    import sys

    pytest.importorskip("dm_control")
    code = ("import sys, numpy as np\n"
            "from dreamerjax.envs.host.dmc import DMCEnv\n"
            "env = DMCEnv('cartpole_balance', image=False)\n"
            "obs = env.reset(seed=0)\n"
            "obs, reward, term, trunc, _ = env.step(np.zeros(1, np.float32))\n"
            "assert sorted(obs) == ['position', 'velocity'] and reward > 0, (obs, reward)\n"
            "assert not any(m.startswith('OpenGL') for m in sys.modules), 'OpenGL loaded'\n")
    env = dict(os.environ, MUJOCO_GL="disable")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


# ----------------------------------------------------------------------------- Crafter


def test_crafter_achievements_in_the_episode_log():
    crafter = pytest.importorskip("crafter")
    env = host.make_host_env("crafter_reward")
    assert env.spec.obs_space == (("image", (64, 64, 3), "uint8"),)
    assert env.spec.num_actions == 17 and env.spec.episode_limit == 10000
    col = host.HostCollector(host.HostVector([lambda: env]), time_limit=250)
    col.reset([0])
    rng = np.random.default_rng(0)
    rewards = 0.0
    for _ in range(260):
        rows, ends = col.step(rng.integers(0, 17, 1))
        if rows["is_first"][0]:
            continue
        rewards += float(rows["reward"][0])
        if ends.ended[0]:
            break
    log = {k: v[0] for k, v in ends.stats.items()}
    names = {f"log_achievement_{k}" for k in crafter.constants.achievements}
    assert set(log) == names | {"log_reward"} and len(names) == 22
    assert dict(env.spec.episode_keys)["log_achievement_wake_up"] == "int32"
    final = env._env._player.achievements
    assert {k: log[f"log_achievement_{k}"] for k in final} == dict(final)
    assert sum(log[k] for k in names) > 0  # this seed unlocks something
    assert log["log_reward"] == pytest.approx(rewards, abs=1e-4)
    assert ends.score[0] == pytest.approx(rewards, abs=1e-4)
