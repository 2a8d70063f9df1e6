"""A short continuous-control run (tiny network, gymnax Pendulum-v1): actions that reach
the env inside its bounds, a finite entropy, and the continuous actor's metrics under the
reference's names (agent.py:319-327 @29eb964: act/action, ent/action, rand/action)."""

import jax
import numpy as np
import pytest
from _runs import STEPS, small_config

from dreamerjax import envs
from dreamerjax.run import checkpoint, driver, records
from dreamerjax.run.plan import make_plan
from dreamerjax.run.trainers import make_trainer


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    out = tmp_path_factory.mktemp("pendulum")
    # The shared small run (tests/_runs.py) on Pendulum: log points at rows 80, 160, 240.
    cfg = small_config("Pendulum-v1")
    driver.train(cfg, (0,), str(out), progress=False, compile_cache=False, report=False)
    return out, cfg


def test_records_carry_the_continuous_actor_metrics(pendulum):
    out, _ = pendulum
    recs = records.read_records(out)
    # The gate opens at row 132 (8 envs filled in turn: 4 of them hold a 17-row window at
    # 8 x 16 + 4 rows), then 1 + (rows - 132) // 2 updates: none, 1 + 14, 1 + 54.
    assert [r["rows"] for r in recs] == [80, 160, STEPS]
    assert [r["updates"] for r in recs] == [0, 15, 55]
    train = recs[-1]["train"]
    for stat in ("mean", "std", "min", "max"):
        for name in ("act/action", "ent/action", "rand/action"):
            assert np.isfinite(train[f"{name}/{stat}"]), f"{name}/{stat}"
    # Samples of the bounded normal (mean tanh(.) in (-1, 1), std in [minstd, maxstd] = [0.1,
    # 1]) are not clipped by the agent: the env wrapper clips (embodied/core/wrappers.py:58-68)
    assert -6.0 < train["act/action/min"] <= train["act/action/mean"] <= train[
        "act/action/max"] < 6.0
    assert 0.1 <= train["act/action/std"]
    # Pendulum: 200-step episodes, truncation only, rewards in [-16.3, 0]
    for r in recs:
        assert all(n == 200 for n in r["eval_lengths"])
        assert all(-16.3 * 200 <= x <= 0 for x in r["eval_returns"])


def test_stored_actions_inside_bounds_and_mapped_to_the_env(pendulum):
    out, cfg = pendulum
    trainer = make_trainer(make_plan(cfg, (0,)))
    index, _ = checkpoint.latest_verified(out)
    states = checkpoint.restore(out, index, trainer.abstract_state())
    actions = np.asarray(states.replay.data["action"])  # [seeds, envs, capacity, 1]
    rows = int(np.asarray(states.replay.count).min())
    acts = actions[0, :, :rows]
    # the replay holds the policy's samples as the reference's does (unclipped; the env's
    # action is clipped to [-1, 1] and rescaled to [-2, 2] on the way in)
    assert acts.shape[-1] == 1 and np.all(np.isfinite(acts)) and np.all(np.abs(acts) < 6.0)
    assert acts.std() > 0.05  # the policy explores; not stuck at a bound
    spec = trainer.setup.spec
    env_acts = np.asarray(jax.vmap(lambda a: envs.to_env_action(spec, a))(
        np.array([[-1.0], [0.0], [1.0], [3.0]], np.float32)))
    np.testing.assert_allclose(env_acts.reshape(-1), [-2.0, 0.0, 2.0, 2.0])
