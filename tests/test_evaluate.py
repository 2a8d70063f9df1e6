"""acting.evaluate stops when its last episode ends: the same returns and lengths as the
same loop playing every tick of the episode limit (the form before); the recorded episode
of a video (acting.play, record) is the evaluation's episode step for step."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _runs import small_config

from dreamerjax.algo import agent as agent_lib
from dreamerjax.run import acting, streams
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
    new = jax.jit(jax.vmap(lambda p, k: acting.evaluate(setup, p, k, EPISODES, mode)))
    old = jax.jit(jax.vmap(lambda p, k: acting.evaluate(setup, p, k, EPISODES, mode,
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
    one = jax.jit(lambda p, k: acting.evaluate(setup, p, k, EPISODES, mode))
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


def test_the_recorded_episode_is_the_evaluations():
    """acting.play records every step of the first episode it evaluates (the video's form),
    the others played beside it unrecorded: the same returns and lengths as its while loop,
    and each recorded step's reward summed up to the episode's end is the first return."""
    setup = _setup(episode_limit=40)
    params = jax.tree.map(lambda x: x[0], _params(setup, (0,)))
    k_init, keys = streams.episode_keys(jax.random.PRNGKey(7), setup.spec.episode_limit)
    resets = jax.random.split(k_init, EPISODES)
    play = jax.jit(lambda p, r, k, record: acting.play(setup, p, r, k, record=record),
                   static_argnums=3)
    ret, length, trace = play(params, resets, keys, True)
    want_ret, want_len, none = play(params, resets, keys, False)
    assert none is None
    np.testing.assert_array_equal(np.asarray(ret), np.asarray(want_ret))
    np.testing.assert_array_equal(np.asarray(length), np.asarray(want_len))
    done = np.asarray(trace["done"])  # [limit + 1, 1]: the episode had ended
    reward = np.asarray(trace["reward"])
    assert done.shape == reward.shape == (41, 1) and not done[:2].any()
    assert EPISODES > 1 and len(set(np.asarray(length).tolist())) > 1  # not all alike
    np.testing.assert_array_equal((~done[1:]).sum(0), np.asarray(length)[:1])
    np.testing.assert_allclose(np.where(done[1:], 0.0, reward[1:]).sum(0),
                               np.asarray(ret)[:1], rtol=1e-6)
