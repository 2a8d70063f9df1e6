"""loop.evaluate stops when its last episode ends: the same returns and lengths as the
same loop playing every tick of the episode limit (the form before)."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _runs import small_config

from dreamerjax.algo import agent as agent_lib
from dreamerjax.run import loop
from dreamerjax.run import setup as setup_lib

EPISODES = 3


def _setup(episode_limit=0):
    # The shared small run's setup (tests/_runs.py): the evaluation of its agent config.
    return setup_lib.make_setup(small_config(episode_limit=episode_limit))


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
    new = jax.jit(jax.vmap(lambda p, k: loop.evaluate(setup, p, k, EPISODES, mode)))
    old = jax.jit(jax.vmap(lambda p, k: loop.evaluate(setup, p, k, EPISODES, mode,
                                                      stop_early=False)))
    ret, length = (np.asarray(x) for x in new(params, keys))
    want_ret, want_len = (np.asarray(x) for x in old(params, keys))
    np.testing.assert_array_equal(ret, want_ret)
    np.testing.assert_array_equal(length, want_len)
    if episode_limit:  # every episode cut at the limit
        assert limit == 6 and (length == limit).all()
    else:  # the untrained policy drops the pole long before CartPole's 500 steps, so
        # the early stop has ticks to save: the longest episode is where it stops
        assert limit == 500 and length.max() < limit
    # One seed alone, with the same numbers.
    one = jax.jit(lambda p, k: loop.evaluate(setup, p, k, EPISODES, mode))
    p0 = jax.tree.map(lambda x: x[0], params)
    r0, l0 = (np.asarray(x) for x in one(p0, keys[0]))
    np.testing.assert_array_equal(r0, want_ret[0])
    np.testing.assert_array_equal(l0, want_len[0])


def test_episode_summary_writes_returns_as_their_float32_decimals():
    """`dreamerjax eval` prints 18.4, not float32's 18.399999618530273, and the mean of
    the printed values."""
    from dreamerjax.run.rundir import episode_summary

    row = episode_summary(3, np.array([14.0, 22.8, 18.4], np.float32))
    assert row == {"seed": 3, "returns": [14.0, 22.8, 18.4], "mean": 18.4}
    assert np.float32(row["returns"][1]) == np.float32(22.8)  # the same float32 value
