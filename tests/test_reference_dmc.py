"""benchmarks/reference_run's DeepMind Control path (`--env dmc_<domain>_<task>`, e3f0224),
the parts that run without the reference: the env names it takes and refuses, the config
keys it keeps over named configs, and EpisodeLog's episode log and resume around a real
numpy port (gymnax_ports.CartPole) following the reference's reset protocol."""

import argparse
import importlib
import json
import os

import numpy as np
import pytest
from _benchmarks import load

dmc = load("reference_run/dmc_env.py")
head = load("reference_run/run_reference_head.py")
base = load("reference_run/harness.py")
command = load("reference_run/run_reference.py")
# by its name (the harness's folder is on the path once its modules are loaded), so that
# the pickled envs of the resume test find the port class again
ports = importlib.import_module("gymnax_ports")


@pytest.mark.parametrize("name, parsed", [
    ("dmc_cartpole_swingup", ("dmc", "cartpole_swingup")),
    ("dmc_cup_catch", ("dmc", "cup_catch")),
    ("dmc_walker_walk", ("dmc", "walker_walk")),
    ("dmc_quadruped_run", ("dmc", "quadruped_run")),
    ("cartpole", ("port", "cartpole")),
    ("pendulum", ("port", "pendulum")),
])
def test_env_names(name, parsed):
    assert dmc.parse_env(name, ports.PORTS) == parsed
    assert head.task_name(name) == (name if parsed[0] == "dmc" else f"gymnax_{name}")


@pytest.mark.parametrize("name", ["atari_pong", "dmc_walker", "dmc_", "walker_walk",
                                  "gym_CartPole-v1", "dmccartpole_swingup"])
def test_other_env_names_are_refused_in_one_line_naming_the_flag(name):
    with pytest.raises(SystemExit) as e:
        dmc.parse_env(name, ports.PORTS)
    message = str(e.value)
    assert message.startswith(f"--env {name}:") and "\n" not in message
    assert "dmc_<domain>_<task>" in message and "cartpole" in message


def test_the_command_refuses_an_unknown_suite_and_dmc_without_e3f0224(capsys):
    with pytest.raises(SystemExit, match="--env atari_pong"):
        command.parse(["--out", "x", "--env", "atari_pong", "--version", "e3f0224"])
    with pytest.raises(SystemExit):
        command.parse(["--out", "x", "--env", "dmc_cartpole_swingup"])
    assert "need --version e3f0224" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command.parse(["--out", "x", "--env", "cartpole", "--configs", "dmc_proprio"])
    args = command.parse(["--out", "x", "--env", "dmc_cartpole_swingup", "--version",
                          "e3f0224", "--configs", "dmc_proprio", "--num-envs", "1"])
    assert (args.env, args.configs, args.num_envs) == ("dmc_cartpole_swingup",
                                                       ["dmc_proprio"], 1)


def test_the_loop_keys_are_protocol_keys_the_schedule_check_guards():
    assert set(head.LOOP_KEYS) <= set(head.PROTOCOL)
    assert head.PROTOCOL["logger.outputs"] == ["jsonl"]
    # the protocol's learning settings are not among them: a named config sets those
    assert "run.train_ratio" not in head.LOOP_KEYS
    assert "configs" in base.OPTIONS


def test_a_run_directory_from_before_configs_resumes_without_named_configs(tmp_path):
    opts = {k: None for k in base.OPTIONS if k != "configs"} | {"version": "e3f0224"}
    (tmp_path / "harness.json").write_text(json.dumps(opts))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "latest").write_text("20261206T000000-000000002000\n")
    args = argparse.Namespace(out=str(tmp_path), resume=True, checkout=None)
    assert base.resolve_options(args)["configs"] == []


def test_the_gl_backend_is_egl_unless_set_and_never_off():
    environ = {}
    assert dmc.set_gl_backend(environ) == "egl" and environ == {"MUJOCO_GL": "egl"}
    assert dmc.set_gl_backend({"MUJOCO_GL": "osmesa"}) == "osmesa"
    for off in ("disable", "OFF", "0"):
        with pytest.raises(SystemExit, match=f"MUJOCO_GL={off}: .* set MUJOCO_GL=egl"):
            dmc.set_gl_backend({"MUJOCO_GL": off})


def test_a_blank_render_needs_no_gl_backend_and_keeps_one_that_is_set():
    environ = {}
    assert dmc.set_gl_backend(environ, blank=True) == "disable"
    assert environ == {"MUJOCO_GL": "disable"}
    assert dmc.set_gl_backend({"MUJOCO_GL": "egl"}, blank=True) == "egl"
    with pytest.raises(SystemExit, match="or take --blank-render"):
        dmc.set_gl_backend({"MUJOCO_GL": "disable"})


def test_the_command_takes_blank_render_for_dmc_only(capsys):
    args = command.parse(["--out", "x", "--env", "dmc_cartpole_swingup", "--version",
                          "e3f0224", "--blank-render"])
    assert args.blank_render and base.resolve_options(args)["blank_render"]
    with pytest.raises(SystemExit):
        command.parse(["--out", "x", "--env", "cartpole", "--blank-render"])
    assert "--blank-render: --env cartpole renders nothing" in capsys.readouterr().err


class DMCHolder:
    """What blank_render reaches through the reference's wrappers: its DMC's `_dmenv`
    (a dm_control env) and `_image` (env.dmc.image)."""

    def __init__(self, image=False, seed=0):
        from dm_control import suite
        self._dmenv = suite.load("cartpole", "swingup", task_kwargs={"random": seed})
        self._image = image
        self.closed = False

    def step(self, action):
        if action["reset"]:
            ts = self._dmenv.reset()
        else:
            ts = self._dmenv.step(action["action"])
        return {"position": ts.observation["position"], "reward": np.float32(ts.reward or 0),
                "is_first": ts.first(), "is_last": ts.last(), "is_terminal": False,
                "log/image": self._dmenv.physics.render(64, 64, camera_id=-1)}

    def close(self):
        self.closed = True


def _dm_control() -> None:
    # as the suite's other dm_control tests: dm_control reads MUJOCO_GL once, at its
    # import, for every later test in this process (nothing here renders for real)
    os.environ.setdefault("MUJOCO_GL", "egl")
    pytest.importorskip("dm_control")


def test_a_blank_render_gives_zeros_of_renders_shape_and_survives_a_resume():
    _dm_control()
    env = dmc.EpisodeLog(DMCHolder(), episodes=[], blank=True)
    row = env.step({"action": np.zeros(1), "reset": True})
    image = row["log/image"]
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8 and not image.any()
    for _ in range(5):
        env.step({"action": np.ones(1), "reset": False})
    state = env.save()
    resumed = dmc.EpisodeLog(DMCHolder(seed=1), episodes=[], blank=True)
    resumed.load(state)
    after = [resumed.step({"action": np.ones(1), "reset": False}) for _ in range(3)]
    again = [env.step({"action": np.ones(1), "reset": False}) for _ in range(3)]
    for a, b in zip(after, again, strict=True):
        np.testing.assert_array_equal(a["position"], b["position"])
        assert not a["log/image"].any()


def test_a_blank_render_is_refused_where_the_agent_sees_images():
    _dm_control()
    with pytest.raises(SystemExit, match="--blank-render: this env's images are on"):
        dmc.EpisodeLog(DMCHolder(image=True), blank=True)


def test_task_generators_follow_their_seed_sequence():
    draw = lambda entropy: dmc.task_generator(entropy).uniform(size=4)  # noqa: E731
    np.testing.assert_array_equal(draw((0, 1, 2)), draw((0, 1, 2)))
    assert not np.array_equal(draw((0, 1, 2)), draw((0, 0, 2)))
    assert not np.array_equal(draw((0, 1, 2)), draw((1, 1, 2)))


# --------------------------------------------------------------------------- EpisodeLog


class CartPoleEnv:
    """gymnax_ports.CartPole under the reference's reset protocol (embodied/envs/
    from_dm.py @e3f0224: a reset row with reward 0 and is_first; the last step with
    is_last, is_terminal only on termination; any step after it resets)."""

    def __init__(self, seed):
        self.port, self.rng, self.done = ports.CartPole(), np.random.default_rng(seed), True
        self.closed = False

    obs_space = {"vector": "vector"}
    act_space = {"action": "action", "reset": "reset"}

    def step(self, action):
        if action["reset"] or self.done:
            self.done = False
            return {"vector": self.port.reset(self.rng), "reward": np.float32(0.0),
                    "is_first": True, "is_last": False, "is_terminal": False}
        obs, reward, terminated, truncated = self.port.step(action["action"])
        self.done = bool(terminated or truncated)
        return {"vector": obs, "reward": np.float32(reward), "is_first": False,
                "is_last": self.done, "is_terminal": bool(terminated)}

    def close(self):
        self.closed = True


def _play(env, actions):
    rows = [env.step({"action": np.int32(0), "reset": True})]
    rows += [env.step({"action": np.int32(a), "reset": False}) for a in actions]
    return rows


def test_episode_log_scores_rows_and_terminations():
    actions = np.random.default_rng(1).integers(0, 2, 400)
    episodes = []
    inner = CartPoleEnv(0)
    env = dmc.EpisodeLog(inner, worker=3, episodes=episodes, run_seed=7)
    assert env.obs_space is inner.obs_space and env.act_space is inner.act_space
    rows = _play(env, actions)
    firsts = [i for i, r in enumerate(rows) if r["is_first"]]
    lasts = [i for i, r in enumerate(rows) if r["is_last"]]
    assert len(lasts) >= 5  # random CartPole episodes end within tens of steps
    assert [e["row_last"] for e in episodes] == lasts
    for first, last, e in zip(firsts, lasts, episodes, strict=False):
        score = sum(float(r["reward"]) for r in rows[first:last + 1])
        assert e == {"seed": 7, "worker": 3, "row_last": last, "length": last - first,
                     "score": score, "terminal": rows[last]["is_terminal"]}
    assert all(e["terminal"] for e in episodes)  # none reaches the 500-step limit


def test_episode_log_resumes_the_saved_env_mid_episode():
    actions = np.random.default_rng(2).integers(0, 2, 300)
    whole, parts = [], []
    _play(dmc.EpisodeLog(CartPoleEnv(5), episodes=whole), actions)

    first = dmc.EpisodeLog(CartPoleEnv(5), episodes=parts)
    _play(first, actions[:137])
    state = first.save()
    assert isinstance(state["env"], bytes)
    # a fresh env of another seed takes the saved one's place and continues its episode
    other = CartPoleEnv(99)
    resumed = dmc.EpisodeLog(other, episodes=parts)
    resumed.load(state)
    assert other.closed and resumed.env is not other
    tail = [resumed.step({"action": np.int32(a), "reset": False}) for a in actions[137:]]
    assert parts == whole
    assert not any(r["is_first"] for r in tail[:1])  # the episode went on, no reset
