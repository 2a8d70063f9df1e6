"""ProcGen, BSuite and Memory Maze on the real packages (procgen-mirror, bsuite,
memory-maze): the reference's wrapper chains (embodied/envs/procgen.py, bsuite.py and
main.py's memmaze at 29eb964), their bad names refused in one line, and their presets at
both reference versions as `dreamerjax info --configs P` shows them."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from dreamerjax.config import keys as C
from dreamerjax.envs import registry
from dreamerjax.envs.host import base as host
from dreamerjax.tools import cli


def _need(*modules: str) -> None:
    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"{m} is not installed")


def _gl() -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    _need("memory_maze", "dm_control", "gym")


# ----------------------------------------------------------------------------- ProcGen


def _raw_procgen(game: str, seed: int, render: bool = False):
    procgen = host.import_quietly("procgen")
    return procgen.ProcgenGym3Env(num=1, num_threads=0, env_name=game, rand_seed=seed,
                                  render_mode="rgb_array" if render else None)


def test_procgen_steps_as_gym3s_gym_adapter_over_an_episode_end():
    _need("procgen", "gym3", "gym")
    env = host.make_host_env("procgen_bossfight")
    assert env.spec.obs_space == (("image", (64, 64, 3), "uint8"),)
    assert env.spec.num_actions == 15 and env.spec.episode_limit == 1000
    raw = _raw_procgen("bossfight", 1)
    obs = env.reset(seed=1)
    np.testing.assert_array_equal(obs["image"], raw.observe()[1]["rgb"][0])
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(40):
        a = int(rng.integers(15))
        _, prev, _ = raw.observe()
        raw.act(np.array([a]))
        reward, ob, first = raw.observe()
        obs, r, term, trunc, _ = env.step(a)
        # gym3's ToGymEnv: the ending step shows the frame before it (procgen has already
        # reset the level); is_terminal on every end (from_gym.py:67-69).
        want = prev if first[0] else ob
        np.testing.assert_array_equal(obs["image"], want["rgb"][0])
        assert (r, term, trunc) == (float(reward[0]), bool(first[0]), False)
        if term:
            ends += 1
            reset = env.reset()
            np.testing.assert_array_equal(reset["image"], ob["rgb"][0])  # the new level
            assert not np.array_equal(reset["image"], obs["image"])
    assert ends == 1  # seed 1 and these actions end the first episode at step 19


def test_procgen_other_sizes_resize_procgens_render_with_pillow():
    _need("procgen", "gym3", "gym")
    from PIL import Image
    env = host.make_host_env("procgen_coinrun", size=(96, 96))
    assert env.spec.obs_space == (("image", (96, 96, 3), "uint8"),)
    raw = _raw_procgen("coinrun", 2, render=True)
    env.reset(seed=2 ** 31 + 2)  # a run's env seeds are uint32, procgen's int32
    for a in (1, 5, 7):
        raw.act(np.array([a]))
        frame = raw.get_info()[0]["rgb"]
        assert frame.shape == (512, 512, 3)
        want = np.array(Image.fromarray(frame).resize((96, 96), Image.BILINEAR))
        np.testing.assert_array_equal(env.step(a)[0]["image"], want)


# ----------------------------------------------------------------------------- BSuite


def test_bsuite_catch_flattened_float32_with_bsuites_terminal():
    _need("bsuite")
    env = host.make_host_env("bsuite_catch")  # catch/0, bsuite.py:16-17
    assert env.bsuite_id == "catch/0"
    assert env.spec.obs_space == (("observation", (50,), "float32"),)
    assert env.spec.num_actions == 3
    import bsuite
    # The sweep leaves catch's seed None (unseeded); the same seed on both sides.
    raw = bsuite.load("catch", {"seed": 123})
    ts = raw.reset()
    np.testing.assert_array_equal(env.reset(seed=123)["observation"],
                                  np.asarray(ts.observation, np.float32).reshape(-1))
    rng = np.random.default_rng(0)
    ends = []
    for t in range(30):
        a = int(rng.integers(3))
        ts = raw.step(a)
        obs, r, term, trunc, _ = env.step(a)
        np.testing.assert_array_equal(obs["observation"], ts.observation.reshape(-1))
        assert r == float(np.float32(ts.reward)) and not trunc
        assert term == (ts.last() and ts.discount == 0)
        if ts.last():
            ends.append((t, r))
            raw.reset()
            env.reset()
    assert [t for t, _ in ends] == [8, 17, 26]  # catch's 9-row board
    assert {r for _, r in ends} <= {-1.0, 1.0}


def test_bsuite_ends_by_bsuites_discount_also_at_its_step_limit():
    _need("bsuite")
    env = host.make_host_env("bsuite_mountain_car/0")
    env.reset(seed=0)
    steps = 0
    while True:
        _, _, term, trunc, _ = env.step(1)  # no push: never reaches the goal
        steps += 1
        if term or trunc:
            break
    # mountain_car's 1,000-step limit is bsuite's termination (discount 0), so FromDM's
    # is_terminal (from_dm.py:75).
    assert (steps, term, trunc) == (1000, True, False)


# ----------------------------------------------------------------------------- Memory Maze


def test_memmaze_extra_obs_as_29eb964s_registration():
    """The keys and spaces; the rows themselves equal the reference's in
    test_host_envs_fixtures (memmaze_9x9), one maze build each."""
    _gl()
    env = host.make_host_env("memmaze_9x9")  # 29eb964: MemoryMaze-9x9-ExtraObs-v0
    assert [n for n, _, _ in env.spec.obs_space] == [
        "image", "target_color", "agent_pos", "agent_dir", "targets_vec", "targets_pos",
        "target_vec", "target_pos", "maze_layout"]
    shapes = {n: (s, d) for n, s, d in env.spec.obs_space}
    assert shapes["image"] == ((64, 64, 3), "uint8")
    assert shapes["maze_layout"] == ((81,), "float32")  # [9, 9] flattened (D31)
    assert shapes["targets_vec"] == ((6,), "float32")  # 3 targets x 2
    assert env.spec.num_actions == 6 and env.spec.episode_limit == 1000
    obs = env.reset(seed=0)
    layout = obs["maze_layout"].reshape(9, 9)
    assert set(np.unique(layout).tolist()) == {0.0, 1.0}  # the maze's cells, free or wall
    for a in (1, 2, 3):
        obs, r, term, trunc, _ = env.step(a)
        assert obs["image"].shape == (64, 64, 3) and not (term or trunc)
    env.close()


@pytest.mark.slow  # another maze build (seconds on a CPU renderer)
def test_memmaze_image_only_at_e3f0224():
    _gl()
    head = host.make_host_env("memmaze_9x9", extra_obs=False)  # e3f0224: MemoryMaze-9x9-v0
    assert head.spec.obs_space == (("image", (64, 64, 3), "uint8"),)
    assert head.reset(seed=0)["image"].shape == (64, 64, 3)
    head.close()


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("env_id, module, names", [
    ("procgen_coinrunn", "procgen", "bigfish, bossfight"),
    ("bsuite_cathc/0", "bsuite", "bandit, bandit_noise"),
    ("bsuite_catch/20", "bsuite", "catch/0 ... catch/19"),
    ("memmaze_10x10", "memory_maze", "9x9, 11x11, 13x13, 15x15"),
])
def test_unknown_names_refused_in_one_line_listing_the_valid_ones(env_id, module, names):
    _need(module)
    with pytest.raises(ValueError) as e:
        host.make_host_env(env_id)
    assert names in str(e.value) and "\n" not in str(e.value)
    assert env_id in str(e.value)


def test_a_missing_extra_names_its_install_commands(monkeypatch):
    suite = registry.SUITES["procgen"]
    assert suite.extra == "procgen" and not suite.compiled
    assert "pip install --no-deps procgen-mirror gym3" in suite.install
    assert "dreamerjax[procgen]" in suite.install
    for name in ("bsuite", "memmaze"):
        assert f"dreamerjax[{name}]" in registry.SUITES[name].install
    monkeypatch.setattr(registry.Suite, "missing", lambda self: ("bsuite",))
    with pytest.raises(registry.MissingExtra, match=r"needs bsuite \(not installed\): pip"):
        host.make_host_env("bsuite_catch/0")


# ----------------------------------------------------------------------------- presets


def _flat(names, reference=None):
    sets = [f"reference={reference}"] if reference else []
    return C.to_dotted(C.resolve(names, sets)[0])


def test_presets_resolve_as_the_references_configs_at_29eb964():
    f = _flat(["procgen"])  # configs.yaml:201-209
    assert (f["task"], f["env.procgen.size"], f["enc.simple.minres"],
            f["dec.simple.minres"], f["run.steps"], f["run.train_ratio"],
            f["enc.spaces"], f["dec.spaces"]) == (
        "procgen_coinrun", (96, 96), 6, 6, 1.1e8, 64, "image", "image")
    f = _flat(["bsuite"])  # :247-251
    assert (f["task"], f["run.num_envs"], f["run.train_ratio"]) == ("bsuite_mnist/0", 1, 1024)
    f = _flat(["memmaze"])  # :260-263
    assert (f["task"], f["enc.spaces"], f["dec.spaces"], f["env.memmaze.extra_obs"]) == (
        "memmaze_11x11", "image", "image", True)


def test_presets_resolve_as_the_references_configs_at_e3f0224():
    f = _flat(["procgen"], "e3f0224")  # configs.yaml:166-168, env.procgen :31
    assert (f["task"], f["env.procgen.size"], f["env.procgen.resize"], f["run.steps"],
            f["run.train_ratio"], f["enc.spaces"]) == (
        "procgen_coinrun", (96, 96), "pillow", 1.1e8, 64, ".*")
    f = _flat(["bsuite"], "e3f0224")  # :189-191
    assert (f["task"], f["run.num_envs"], f["run.train_ratio"]) == ("bsuite_mnist/0", 1, 1024)
    assert _flat([], "e3f0224")["env.memmaze.extra_obs"] is False  # MemoryMaze-{size}-v0
    with pytest.raises(C.ConfigError, match="unknown config name of e3f0224"):
        C.resolve(["memmaze"], ["reference=e3f0224"])


@pytest.mark.parametrize("reference", ["29eb964", "e3f0224"])
def test_multicpu_refused_in_one_line_saying_how(reference):
    with pytest.raises(C.ConfigError) as e:
        C.resolve(["multicpu"], [f"reference={reference}"])
    assert "xla_force_host_platform_device_count" in str(e.value)
    assert "--data-devices" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("argv, module", [
    (["--configs", "procgen"], "procgen"),
    (["--configs", "procgen", "--reference", "e3f0224"], "procgen"),
    (["--configs", "bsuite", "--reference", "e3f0224"], "bsuite"),
])
def test_info_shows_the_presets(capsys, argv, module):
    _need(module)
    code = cli.main(["info", *argv])
    out, _ = capsys.readouterr()
    assert code == 0
    preset = argv[1]
    task = {"procgen": '"procgen_coinrun"', "bsuite": '"bsuite_mnist/0"'}[preset]
    assert f"  task                          {task}  [--configs {preset}]" in out
    # bsuite_mnist needs the MNIST files bsuite downloads: counted where they are.
    assert "Optimised variables:" in out or "Networks not counted: env 'bsuite_mnist/0'" in out
