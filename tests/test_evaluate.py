"""loop.evaluate stops when its last episode ends: the same returns and lengths as a
scan over all episode_limit ticks (the implementation before), in fewer ticks."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _benchmarks import load
from _runs import small_config

from dreamerjax.algo import agent as agent_lib
from dreamerjax.run import loop
from dreamerjax.run import setup as setup_lib

EPISODES = 3


# The evaluation as it was (a lax.scan over every tick of the episode limit): one copy, in
# the benchmark that times the two forms.
_full_scan = load("eval_ticks.py").full_scan


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
    new = jax.jit(jax.vmap(lambda p, k: loop.evaluate(setup, p, k, EPISODES, mode,
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
    one = jax.jit(lambda p, k: loop.evaluate(setup, p, k, EPISODES, mode,
                                                  with_ticks=True))
    p0 = jax.tree.map(lambda x: x[0], params)
    r0, l0, t0 = (np.asarray(x) for x in one(p0, keys[0]))
    np.testing.assert_array_equal(r0, want_ret[0])
    np.testing.assert_array_equal(l0, want_len[0])
    assert int(t0) == int(ticks[0])
