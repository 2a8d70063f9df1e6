"""PinPad (numpy, no extra) and LocoNav (dm_control's locomotion with labmaze) on the host
path: their spaces, episodes, logs and refusals (rows against the reference's own wrappers:
test_host_envs_fixtures.py)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from dreamerjax.config import keys
from dreamerjax.envs import registry
from dreamerjax.envs.host import base as host
from dreamerjax.envs.host import pinpad

# ----------------------------------------------------------------------------- PinPad


def _walk(env, x, y):
    """Step along x, then y, to cell (x, y); returns the rewards."""
    rewards = []
    while env.player != (x, y):
        px, py = env.player
        a = (3 if x > px else 4) if x != px else (1 if y > py else 2)
        rewards.append(env.step(a)[1])
    return rewards


def _cell(image, x, y):
    return image[4 * y:4 * y + 4, 4 * x:4 * x + 4].reshape(-1, 3)


def test_pinpad_spaces_and_rooms():
    env = host.make_host_env("pinpad_three")
    assert env.spec.obs_space == (("image", (64, 64, 3), "uint8"),)
    assert env.spec.discrete and env.spec.num_actions == 5 and env.spec.episode_limit == 10000
    assert env.target == (1, 2, 3) and host.make_host_env("pinpad_eight").target == tuple(
        range(1, 9))
    for task in pinpad.LAYOUTS:
        grid = pinpad.room(task)
        assert grid.shape == (14, 16) and (grid[[0, -1]] == -1).all()
        assert (grid[:, [0, -1]] == -1).all() and (grid[1:-1, 1:-1] >= 0).all()
    # Spawns are every free cell, column by column (x-major).
    assert len(env.spawns) == 12 * 14 and env.spawns[:2] == [(1, 1), (1, 2)]


def test_pinpad_sequence_reward_countdown_and_respawn():
    env = pinpad.PinPadEnv("three")
    env.reset(seed=3)
    env.player = (7, 7)  # floor between the pads
    assert sum(_walk(env, 2, 2)) == 0 and env.sequence == [1]
    assert sum(_walk(env, 2, 3)) == 0 and env.sequence == [1]  # the same pad: no repeat
    assert sum(_walk(env, 7, 10)) == 0 and env.sequence == [1, 2]
    rewards = _walk(env, 12, 4)  # the first cell of pad 3 on the way
    assert rewards[-1] == 10.0 and sum(rewards) == 10.0 and env.sequence == [1, 2, 3]
    image = env.render()
    assert (_cell(image, 12, 4) == 0).all()  # the player
    assert (_cell(image, 7, 7) == (223, 255, 223)).all()  # the countdown background
    assert (_cell(image, 12, 2) == (0, 0, 255)).all()  # the pad under the player
    assert (_cell(image, 2, 2) == (255, 229, 229)).all()  # other pads faded to 10 %
    for i, color in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255)]):
        assert (image[56:60, 4 * (2 * i + 1):4 * (2 * i + 2)] == color).all()
    assert (image[60:] == 192).all() and (_cell(image, 0, 0) == 192).all()
    # Nine more steps of the countdown: no reward, then the respawn empties the sequence.
    for _ in range(9):
        assert env.step(0)[1] == 0.0 and env.sequence == [1, 2, 3]
    env.step(0)
    assert env.countdown == 0 and env.sequence in ([], [1], [2], [3])
    assert (_cell(env.render(), 7, 7) == 255).all()
    # Walls stop the player.
    env.player = (1, 1)
    env.step(4)
    env.step(2)
    assert env.player == (1, 1)


def test_pinpad_seeded_spawns_and_time_limit():
    env = pinpad.PinPadEnv("five", length=5)
    first = [env.reset(seed=s)["image"] for s in (1, 1, 2)]
    np.testing.assert_array_equal(first[0], first[1])
    assert any((env.reset(seed=s)["image"] != first[0]).any() for s in range(2, 6))
    env.reset(seed=1)
    ends = [env.step(0)[2:4] for _ in range(5)]
    assert ends == [(False, False)] * 4 + [(False, True)]  # a time limit, never terminal


def test_pinpad_unknown_task_lists_the_tasks():
    with pytest.raises(ValueError) as e:
        host.make_host_env("pinpad_nine")
    message = str(e.value)
    assert "\n" not in message and "'nine'" in message
    assert all(f"pinpad_{t}" in message for t in ("three", "four", "five", "six", "seven",
                                                  "eight"))


# ----------------------------------------------------------------------------- LocoNav


def _loconav():
    for package in ("dm_control", "labmaze"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")
    os.environ.setdefault("MUJOCO_GL", "egl")


def test_loconav_bad_tasks_are_one_line_before_building():
    from dreamerjax.envs.host import loconav
    for task, words in (("quadruped_maze_m", "quadruped is its own model"),
                        ("ant_maze_q", "unknown LocoNav task"), ("dog_empty", "tasks:"),
                        ("ant_empty_fasthz", "_<N>hz")):
        with pytest.raises(ValueError, match=words) as e:
            loconav.parse_task(task, f"loconav_{task}")
        assert "\n" not in str(e.value) and (words == "_<N>hz" or "loconav_ant_maze_xxl"
                                             in str(e.value))
    assert loconav.parse_task("ant_maze_s_20hz", "x") == ("ant", "maze_s", 20)
    assert loconav.parse_task("ant_empty", "x") == ("ant", "empty", 50)


def test_loconav_missing_extra_names_the_install_command(monkeypatch):
    suite = registry.SUITES["loconav"]
    assert suite.extra == "loconav" and "labmaze" in suite.requires
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "labmaze" else real(name, *a))
    with pytest.raises(registry.MissingExtra) as e:
        host.make_host_env("loconav_ant_maze_m")
    assert "labmaze" in str(e.value) and "dreamerjax[loconav]" in str(e.value)
    assert "\n" not in str(e.value)


def test_loconav_ant_maze_spaces_rows_and_coverage():
    _loconav()
    env = host.make_host_env("loconav_ant_maze_s", repeat=1)
    spec = env.spec
    obs_space = dict((n, (s, d)) for n, s, d in spec.obs_space)
    assert obs_space["walker_egocentric_camera"] == ((64, 64, 3), "uint8")
    assert obs_space["walker_joints_pos"] == ((8,), "float32")
    assert obs_space["walker_body_height"] == ((1,), "float32")
    assert spec.image_keys() == ("walker_egocentric_camera",)
    assert not spec.discrete and spec.action_dims == 8 and spec.episode_limit == 3000
    assert spec.episode_keys == (("log_coverage", "int32"),)
    assert host.make_host_env("loconav_ant_maze_s").spec.episode_limit == 1500  # repeat 2
    obs = env.reset(seed=0)
    again = env.reset(seed=0)
    for name in obs:
        np.testing.assert_array_equal(obs[name], again[name])
    rng = np.random.default_rng(0)
    coverage = []
    for _ in range(40):
        obs, reward, term, trunc, info = env.step(rng.uniform(-1.2, 1.2, 8).astype(np.float32))
        assert reward == 0.0 and not term and not trunc
        assert all(v.dtype == np.float32 for n, v in obs.items() if v.ndim == 1)
        coverage.append(info["episode_log"]["log_coverage"])
    assert coverage[0] >= 1 and coverage == sorted(coverage)
    frame = env.render()
    assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8 and frame.std() > 0


# ----------------------------------------------------------------------------- presets


@pytest.mark.parametrize("reference", ["29eb964", "e3f0224"])
def test_loconav_preset_at_both_versions(reference):
    config, _ = keys.resolve(["loconav"], [f"reference={reference}"])
    assert config.run.env == "loconav_ant_maze_m" and config.run.train_ratio == 256
    assert config.env.loconav.repeat == 1 and config.env.loconav.size == (64, 64)
    assert config.env.loconav.camera == -1
    assert config.agent.enc_spaces == ".*" == config.agent.dec_spaces
    # The suite's default repeat: 2 at 29eb964 (configs.yaml:86), 1 at e3f0224 (:37).
    default, _ = keys.resolve([], [f"reference={reference}", "task=loconav_ant_maze_s"])
    assert default.env.loconav.repeat == (2 if reference == "29eb964" else 1)


@pytest.mark.parametrize("name, words", [
    ("minecraft", "MineRL, which has no installable release"),
    ("dmlab", "DeepMind Lab, a native build")])
def test_minecraft_and_dmlab_refused_in_one_line(name, words):
    for reference in ("29eb964", "e3f0224"):
        with pytest.raises(keys.ConfigError) as e:
            keys.resolve([name], [f"reference={reference}"])
        assert str(e.value).startswith(f"--configs {name}: ") and words in str(e.value)
        assert "\n" not in str(e.value)
    with pytest.raises(keys.ConfigError, match=f"env.{name}.size.*{words}"):
        keys.resolve([], [f"env.{name}.size=[64, 64]"])
