"""Host envs: Gymnasium adapter, the collector's rows, the vector's worker errors."""

from __future__ import annotations

import os
import sys
import textwrap

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium import spaces as gs  # noqa: E402

from dreamerjax.envs.host import base as host  # noqa: E402
from dreamerjax.envs.host.gym import GymEnv  # noqa: E402


class DictEnv(gymnasium.Env):
    """Dict observation with a vector, an image, a nested Discrete; a bounded Box action
    whose second dim is unbounded. Observation `pos` echoes the last env action."""

    observation_space = gs.Dict({
        "pos": gs.Box(-np.inf, np.inf, (2,), np.float64),
        "cam": gs.Box(0, 255, (8, 6, 3), np.uint8),
        "inner": gs.Dict({"flag": gs.Discrete(3, start=1), "scalar": gs.Box(0, 1, ())}),
    })
    action_space = gs.Box(np.array([0.0, -np.inf], np.float32),
                          np.array([10.0, np.inf], np.float32), (2,), np.float32)

    def _obs(self, a):
        return {"pos": np.asarray(a, np.float64), "cam": np.full((8, 6, 3), 7, np.uint8),
                "inner": {"flag": 3, "scalar": np.float32(0.5)}}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs([0.0, 0.0]), {}

    def step(self, action):
        return self._obs(action), 1.0, False, False, {}


class CountEnv(gymnasium.Env):
    """obs = [steps in episode]; reward = step number; terminates at `term`, truncates at
    `trunc` (whichever comes first); `boom` raises at that step, `die` exits the process."""

    observation_space = gs.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gs.Discrete(2)

    def __init__(self, term=0, trunc=0, boom=0, die=0):
        self.term, self.trunc, self.boom, self.die = term, trunc, boom, die
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros((1,), np.float32), {}

    def step(self, action):
        self.t += 1
        if self.boom and self.t == self.boom:
            raise RuntimeError(f"boom at step {self.t}")
        if self.die and self.t == self.die:
            os._exit(7)
        term = bool(self.term) and self.t == self.term
        trunc = bool(self.trunc) and self.t == self.trunc
        return np.array([self.t], np.float32), float(self.t), term, trunc, {}


def count_factory(**kw):
    return lambda: GymEnv(lambda: CountEnv(**kw), env_id="gym_Count")


class CountFactory:
    """Picklable (module level) for worker processes."""

    def __init__(self, **kw):
        self.kw = kw

    def __call__(self):
        return GymEnv(lambda: CountEnv(**self.kw), env_id="gym_Count")


def test_dict_observation_keys_dtypes_and_action_bounds():
    env = GymEnv(DictEnv)
    # Gymnasium's Dict sorts its keys; nested keys are joined by '_'.
    assert env.spec.obs_space == (
        ("cam", (8, 6, 3), "uint8"), ("inner_flag", (3,), "float32"),
        ("inner_scalar", (1,), "float32"), ("pos", (2,), "float32"))
    assert env.spec.image_keys() == ("cam",)
    assert not env.spec.discrete and env.spec.action_dims == 2
    obs = env.reset(seed=0)
    assert obs["cam"].dtype == np.uint8 and obs["pos"].dtype == np.float32
    np.testing.assert_array_equal(obs["inner_flag"], [0, 0, 1])  # Discrete(3, start=1): 3
    np.testing.assert_array_equal(obs["inner_scalar"], [0.5])
    # [-1, 1] -> [0, 10] on the bounded dim; the unbounded dim passes through, clipped.
    for a, want in (([-1, 0.3], [0, 0.3]), ([1, -0.5], [10, -0.5]), ([0, 5], [5, 1]),
                    ([-3, -7], [0, -1])):
        obs, *_ = env.step(np.array(a, np.float32))
        np.testing.assert_allclose(obs["pos"], want, rtol=1e-6)


def test_gym_by_id_and_entry_point(tmp_path, monkeypatch):
    env = host.make_host_env("gym_CartPole-v1")
    assert env.spec.obs_space == (("vector", (4,), "float32"),)
    assert env.spec.discrete and env.spec.num_actions == 2 and env.spec.episode_limit == 500
    mod = "dreamerjax_test_userenv"
    (tmp_path / f"{mod}.py").write_text(textwrap.dedent("""
        import gymnasium, numpy as np
        class MyEnv(gymnasium.Env):
            observation_space = gymnasium.spaces.Box(0, 255, (4, 4, 3), np.uint8)
            action_space = gymnasium.spaces.Discrete(3)
            def reset(self, seed=None, options=None):
                return np.zeros((4, 4, 3), np.uint8), {}
            def step(self, action):
                return np.full((4, 4, 3), action, np.uint8), 0.0, True, False, {}
        gymnasium.register("MyEnv-v0", entry_point=f"{__name__}:MyEnv")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    env = host.make_host_env(f"gym_{mod}:MyEnv-v0")
    assert env.spec.obs_space == (("image", (4, 4, 3), "uint8"),)
    env.reset(seed=1)
    obs, _, term, trunc, _ = env.step(2)
    assert term and not trunc and obs["image"].max() == 2
    monkeypatch.delitem(sys.modules, mod)


def test_bad_ids_and_settings():
    with pytest.raises(ValueError, match="NoSuchEnv"):
        host.make_host_env("gym_NoSuchEnv-v0")
    with pytest.raises(ValueError, match="SUITE_TASK"):
        host.make_host_env("atari")
    with pytest.raises(ValueError, match=r"env.atari.colour: unknown setting"):
        host.suite_settings("atari", {"colour": True})
    assert host.suite_settings("atari100k")["sticky"] is False


def _run(collector, actions):
    rows, out = [], []
    for a in actions:
        r, e = collector.step(np.full((collector.num_envs,), a))
        rows.append(r)
        out.append(e)
    return rows, out


def _flags(r, i=0):
    return (float(r["obs"]["vector"][i, 0]), float(r["reward"][i]), bool(r["is_first"][i]),
            bool(r["is_last"][i]), bool(r["is_terminal"][i]))


def test_rows_on_termination_and_time_limit():
    vec = host.HostVector([count_factory(term=3), count_factory(trunc=2),
                           count_factory(term=5, trunc=9)])
    col = host.HostCollector(vec, time_limit=4)
    first = col.reset([0, 1, 2])
    assert first["is_first"].all() and not first["reward"].any()
    rows, ends = _run(col, [1] * 7)
    # env 0: terminates at step 3; held on its is_last row, then the next reset row.
    assert [_flags(r, 0) for r in rows] == [
        (1, 1, False, False, False), (2, 2, False, False, False), (3, 3, False, True, True),
        (0, 0, True, False, False), (1, 1, False, False, False), (2, 2, False, False, False),
        (3, 3, False, True, True)]
    # env 1: its own truncation at step 2 is is_last without is_terminal.
    assert [_flags(r, 1)[2:] for r in rows[:4]] == [
        (False, False, False), (False, True, False), (True, False, False),
        (False, False, False)]
    # env 2: the collector's time limit (4 steps) truncates before the env terminates (5).
    assert [_flags(r, 2) for r in rows[3:5]] == [(4, 4, False, True, False),
                                                 (0, 0, True, False, False)]
    assert ends[2].ended[0] and ends[2].terminal[0] and ends[2].length[0] == 3
    assert ends[2].score[0] == 6.0
    assert ends[1].ended[1] and not ends[1].terminal[1] and ends[1].length[1] == 2
    assert ends[3].ended[2] and not ends[3].terminal[2] and ends[3].length[2] == 4
    assert not ends[0].ended.any()


def test_serial_and_worker_processes_give_the_same_rows():
    factories = [host.EnvFactory("gym_CartPole-v1")] * 2
    got = []
    for parallel in (False, True):
        with host.HostVector(factories, parallel=parallel) as vec:
            col = host.HostCollector(vec)
            rows = [col.reset([3, 4])]
            rng = np.random.default_rng(0)
            for _ in range(40):
                rows.append(col.step(rng.integers(0, 2, 2))[0])
            got.append(rows)
    for a, b in zip(*got, strict=True):
        np.testing.assert_array_equal(a["obs"]["vector"], b["obs"]["vector"])
        np.testing.assert_array_equal(a["is_last"], b["is_last"])
    assert any(r["is_first"].any() for r in got[0][1:])  # an episode ended and reset


@pytest.mark.parametrize("parallel", [False, True])
def test_env_that_raises_names_the_env_and_error(parallel):
    make = CountFactory(boom=2) if parallel else count_factory(boom=2)
    vec = host.HostVector([CountFactory() if parallel else count_factory(), make],
                          parallel=parallel)
    col = host.HostCollector(vec)
    col.reset([0, 1])
    col.step(np.zeros(2))
    with pytest.raises(host.EnvWorkerError, match=r"env 1 \(gym_Count\).*boom at step 2"):
        col.step(np.zeros(2))
    with pytest.raises(host.EnvWorkerError, match="closed"):
        col.step(np.zeros(2))


def test_worker_that_dies_is_reported_not_waited_for():
    vec = host.HostVector([CountFactory(), CountFactory(die=1)], parallel=True, timeout=60)
    col = host.HostCollector(vec)
    col.reset([0, 1])
    with pytest.raises(host.EnvWorkerError, match=r"env 1 .*died \(exit code 7\)"):
        col.step(np.zeros(2))
