"""A short continuous-control run (tiny network, gymnax Pendulum-v1): actions that reach
the env inside its bounds, a finite entropy, and the continuous actor's metrics under the
reference's names (agent.py:319-327 @29eb964: act/action, ent/action, rand/action). A
deployed policy (result.policy, load_policy, an exported file) sends the env's actions:
clipped and rescaled to its bounds as training's env wrappers do."""

import jax
import numpy as np
import pytest
from _runs import STEPS, small_config

import dreamerjax
from dreamerjax import envs
from dreamerjax.algo import agent as agent_lib
from dreamerjax.envs import registry
from dreamerjax.run import checkpoint, driver, records
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.plan import make_plan
from dreamerjax.run.policy import Policy, env_actions_of, export, load_policy
from dreamerjax.run.resume import load_state
from dreamerjax.run.trainers import make_trainer


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    out = tmp_path_factory.mktemp("pendulum")
    # The shared small run (tests/_runs.py) on Pendulum: log points at rows 80, 160, 240.
    cfg = small_config("Pendulum-v1")
    result = driver.train(cfg, (0,), str(out), progress=False,
                          report=False)
    return out, cfg, result


def test_records_carry_the_continuous_actor_metrics(pendulum):
    out, _, _ = pendulum
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
    out, cfg, _ = pendulum
    trainer = make_trainer(make_plan(cfg, (0,)))
    index, _ = checkpoint.latest_verified(out)
    states = load_state(trainer, str(out), index, checkpoint.read_meta(out, index))
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


def test_deployed_pendulum_policy_sends_actions_inside_the_env_bounds(pendulum, tmp_path):
    """256 episodes x 20 sampled steps of the trained policy, three ways it is deployed:
    every action inside Pendulum's [-2, 2], and exactly the env's mapping of the raw
    action (envs.to_env_action, the compiled env's step)."""
    out, cfg, result = pendulum
    spec = setup_lib.make_setup(cfg).spec
    to_env = jax.jit(jax.vmap(lambda a: envs.to_env_action(spec, a)))
    deployed = {"result.policy": result.make_policy(0), "load_policy": load_policy(out),
                "exported": load_policy(export(out, 0, tmp_path / "p.npz"))}
    obs = jax.random.normal(jax.random.PRNGKey(1), (20, 256, 3)) * 3.0
    sent = {}
    for name, policy in deployed.items():
        state = policy.init(256)
        acts, raws = [], []
        for t in range(20):
            key = jax.random.PRNGKey(100 + t)
            raw, _ = policy.act({"vector": obs[t]}, state, key=key, raw=True)
            action, state = policy.act({"vector": obs[t]}, state, key=key)
            assert raw.shape == action.shape == (256, 1) and raw.dtype == np.float32
            np.testing.assert_array_equal(np.asarray(action), np.asarray(to_env(raw)), name)
            acts.append(np.asarray(action))
            raws.append(np.asarray(raw))
        acts, raws = np.stack(acts), np.stack(raws)
        assert acts.min() >= -2.0 and acts.max() <= 2.0, name
        np.testing.assert_allclose(acts, 2.0 * np.clip(raws, -1, 1), atol=1e-6)
        sent[name] = acts
    # the same parameters and keys: the same actions, however the policy was deployed
    np.testing.assert_array_equal(sent["load_policy"], sent["result.policy"])
    np.testing.assert_array_equal(sent["exported"], sent["result.policy"])
    action, _ = result.policy({"vector": obs[0]}, seed=0, key=jax.random.PRNGKey(100))
    np.testing.assert_array_equal(np.asarray(action), sent["result.policy"][0])


LOW, HIGH = np.array([-3.0, 0.5]), np.array([1.0, 4.0])
RAW = np.array([[-3.0, -1.0], [-1.0, -0.5], [-0.25, 0.0], [0.3, 0.7], [1.0, 1.0],
                [2.5, 7.0]], np.float32)


def _asym_box_env(dtype):
    gymnasium = pytest.importorskip("gymnasium")

    class AsymBox(gymnasium.Env):
        """Asymmetric bounds; keeps every action it is sent."""

        sent: list = []

        def __init__(self):
            self.observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
            self.action_space = gymnasium.spaces.Box(LOW.astype(dtype), HIGH.astype(dtype),
                                                     (2,), dtype)

        def reset(self, seed=None, options=None):
            return np.zeros(3, np.float32), {}

        def step(self, action):
            AsymBox.sent.append(np.array(action))
            return np.zeros(3, np.float32), 0.0, False, False, {}

    return AsymBox


def _untrained_policy(env_id: str) -> Policy:
    cfg = dreamerjax.make_config(env_id, tiny=True)
    setup = setup_lib.make_setup(cfg)
    params = agent_lib.init_params(jax.random.PRNGKey(0), cfg.agent, setup.spaces)
    return Policy(cfg, setup.spaces, params, env_actions=env_actions_of(cfg, setup))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_asymmetric_host_bounds_map_as_the_training_env_wrapper(dtype, tmp_path):
    """A registered Gymnasium env with bounds [-3, 1] x [0.5, 4]: the policy's actions are
    the ones the env receives when training's wrapper (GymEnv.step) is given the raw
    action, bit for bit and in the Box's dtype, also from an exported file."""
    env_cls = _asym_box_env(dtype)
    name = f"PolicyAsymBox{np.dtype(dtype).name}-v0"
    env_id = dreamerjax.register_env(name, env_cls, max_episode_steps=50)
    try:
        policy = _untrained_policy(env_id)
        exported = load_policy(policy.save(tmp_path / "asym.npz"))
        assert exported.env_actions == policy.env_actions
        assert policy.env_actions.dtype == np.dtype(dtype).name
        env = setup_lib.env_factory(policy.config)()
        env.reset(seed=0)
        obs = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (64, 3)), np.float32)
        state = policy.init(64)
        raw, _ = policy.act({"vector": obs}, state, key=jax.random.PRNGKey(3), raw=True)
        action, _ = policy.act({"vector": obs}, state, key=jax.random.PRNGKey(3))
        again, _ = exported.act({"vector": obs}, exported.init(64), key=jax.random.PRNGKey(3))
        # hand-picked raw actions too: outside [-1, 1], on the bounds, inside
        mapped = policy.env_actions.on_host(policy.env_actions.in_program(RAW))
        env_cls.sent.clear()
        for a in [*np.asarray(raw), *RAW]:
            env.step(a)
        want = np.stack(env_cls.sent)
        got = np.concatenate([np.asarray(action), mapped])
        assert got.dtype == want.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.asarray(again), np.asarray(action))
        assert np.all(got >= LOW) and np.all(got <= HIGH)
        np.testing.assert_allclose(mapped[[0, 4, 5]], [LOW, HIGH, [HIGH[0], HIGH[1]]])
        env.close()
    finally:
        import gymnasium

        gymnasium.registry.pop(name, None)


class _AsymJax:
    """A JAX env with bounds [-3, 1] x [0.5, 4] (continuous)."""

    obs_space = {"vector": ((3,), "float32")}
    num_actions = 0
    action_low, action_high = tuple(LOW), tuple(HIGH)
    episode_limit = 20

    def reset(self, key):
        return jax.numpy.zeros(()), {"vector": jax.numpy.zeros(3)}

    def step(self, key, state, action):
        return state, {"vector": jax.numpy.zeros(3)}, 0.0, False


def test_asymmetric_compiled_bounds_map_as_the_training_env_step():
    """A registered JAX env with asymmetric bounds: the policy's actions are what the
    compiled env step (envs.to_env_action) makes of the raw action."""
    env_id = dreamerjax.register_env("policyasym_box", _AsymJax())
    try:
        policy = _untrained_policy(env_id)
        assert not policy.env_actions.host and policy.env_actions.shape == (2,)
        spec = envs.make_env(env_id, dict_obs=True)
        to_env = jax.jit(jax.vmap(lambda a: envs.to_env_action(spec, a)))
        obs = jax.random.normal(jax.random.PRNGKey(2), (64, 3))
        state = policy.init(64)
        raw, _ = policy.act({"vector": obs}, state, key=jax.random.PRNGKey(3), raw=True)
        action, _ = policy.act({"vector": obs}, state, key=jax.random.PRNGKey(3))
        np.testing.assert_array_equal(np.asarray(action), np.asarray(to_env(raw)))
        mapped = np.asarray(jax.jit(policy.env_actions.in_program)(RAW))
        np.testing.assert_array_equal(mapped, np.asarray(to_env(RAW)))
        np.testing.assert_allclose(mapped[[0, 4, 5]], [LOW, HIGH, HIGH])
    finally:
        registry.SUITES.pop("policyasym", None)
        envs.make_env.cache_clear()
