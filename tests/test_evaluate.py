"""train.evaluate stops when its last episode ends: the same returns and lengths as a
scan over all episode_limit ticks (the implementation before), in fewer ticks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax import agent as agent_lib
from dreamerjax import envs as envs_lib
from dreamerjax import train as train_lib

EPISODES = 3


def _full_scan(setup, params, key, episodes, mode=False):
    """The evaluation as it was: a lax.scan over every tick of the episode limit."""
    cfg = setup.config.agent
    k_init, k_run = jax.random.split(key)
    env, row = jax.vmap(lambda k: envs_lib.collector_init(setup.spec, k))(
        jax.random.split(k_init, episodes))
    carry = agent_lib.policy_initial(cfg, setup.spaces, episodes)
    zeros = jnp.zeros((episodes,), jnp.float32)

    def step(c, k):
        env, row, carry, ret, length, done = c
        k_pol, k_env = jax.random.split(k)
        _, carry, env, row, _ = train_lib.act_and_step(setup, params, carry, row, env,
                                                       k_pol, k_env, mode)
        live = ~done
        ret = ret + jnp.where(live, row["reward"], 0.0)
        length = length + live.astype(jnp.float32)
        done = done | row["is_last"]
        return (env, row, carry, ret, length, done), None

    init = (env, row, carry, zeros, zeros, jnp.zeros((episodes,), bool))
    (_, _, _, ret, length, _), _ = jax.lax.scan(
        step, init, jax.random.split(k_run, setup.spec.episode_limit))
    return ret, length


def _setup(episode_limit=0):
    config = train_lib.make_config("CartPole-v1", tiny=True, steps=256, eval_every=128,
                                   num_envs=8, batch_length=9, episode_limit=episode_limit)
    return train_lib.make_setup(config)


def _params(setup, seeds):
    return jax.vmap(lambda k: agent_lib.init(k, setup.config.agent, setup.spaces).params)(
        jnp.stack([jax.random.PRNGKey(s) for s in seeds]))


@pytest.mark.parametrize(("episode_limit", "mode"), [(0, False), (6, True)])
def test_evaluate_stops_early_with_the_full_scans_results(episode_limit, mode):
    setup = _setup(episode_limit)
    limit = setup.spec.episode_limit
    seeds = (0, 1)
    params = _params(setup, seeds)
    keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 10**6) for s in seeds])
    new = jax.jit(jax.vmap(lambda p, k: train_lib.evaluate(setup, p, k, EPISODES, mode,
                                                           with_ticks=True)))
    old = jax.jit(jax.vmap(lambda p, k: _full_scan(setup, p, k, EPISODES, mode)))
    ret, length, ticks = (np.asarray(x) for x in new(params, keys))
    want_ret, want_len = (np.asarray(x) for x in old(params, keys))
    np.testing.assert_array_equal(ret, want_ret)
    np.testing.assert_array_equal(length, want_len)
    # Each seed's tick count is the length of its longest episode (vmapped, the loop
    # runs until every seed is done; a seed done earlier keeps its carry, its count too).
    assert ticks.tolist() == length.max(axis=1).astype(int).tolist()
    if episode_limit:  # every episode cut at the limit: the loop stops there
        assert ticks.tolist() == [limit] * len(seeds) and limit == 6
        assert (length == limit).all()
    else:  # the untrained policy drops the pole long before CartPole's 500 steps
        assert limit == 500 and ticks.max() < limit
    # One seed alone stops at its own last episode, with the same numbers.
    one = jax.jit(lambda p, k: train_lib.evaluate(setup, p, k, EPISODES, mode,
                                                  with_ticks=True))
    p0 = jax.tree.map(lambda x: x[0], params)
    r0, l0, t0 = (np.asarray(x) for x in one(p0, keys[0]))
    np.testing.assert_array_equal(r0, want_ret[0])
    np.testing.assert_array_equal(l0, want_len[0])
    assert int(t0) == int(ticks[0])
