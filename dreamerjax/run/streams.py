"""Every random key of a run, derived from its seed by the name of its stream: one table.

    stream        key                                          draws
    train         PRNGKey(seed)                                init_seed's: the agent's
                                                               init, the envs', every tick's
    eval          fold_in(PRNGKey(seed), 1,000,000 + log index) a log point's evaluation
                                                               (and its videos, run/videos.py:
                                                               the same episodes again)
    report        fold_in(PRNGKey(seed), 2,000,000 + log index) a log point's open-loop report
    video         fold_in(PRNGKey(seed), 3,000,000)             eval_artifacts' video episode
    evaluate_run  fold_in(PRNGKey(seed), 4,000,000)             `dreamerjax eval`'s episodes
    act           fold_in(PRNGKey(seed), 5,000,000)             Policy.init: acting outside a run

The offsets are SPAN apart and an index is below SPAN (plan.make_plan refuses a run of
SPAN log points or more), so no two streams share a key (tests/test_streams.py). Host envs
seed their resets from the same integers (host_loop.env_seed(seed, data, env)).

How a stream's key is spent, written once here for every caller (run/acting.py):

    tick_keys(key)             a training tick: (the next tick's key, the policy's, the envs')
    episode_keys(key, limit)   an episode: (the envs' reset key, one key per tick [limit])
    step_keys(key)             an episode's tick: (the policy's key, the envs')
"""

from __future__ import annotations

import jax
import numpy as np

SPAN = 1_000_000  # indices of one stream: 0 ... SPAN - 1
OFFSETS = {"eval": 1 * SPAN, "report": 2 * SPAN, "video": 3 * SPAN,
           "evaluate_run": 4 * SPAN, "act": 5 * SPAN}
STREAMS = ("train", *OFFSETS)


def data(name: str, index: int = 0) -> int:
    """The integer folded into PRNGKey(seed) for key `index` of stream `name` (not for
    train, whose key is PRNGKey(seed) itself)."""
    if name not in OFFSETS:
        raise ValueError(f"stream {name!r}: one of {', '.join(OFFSETS)} folds an index in")
    if not 0 <= int(index) < SPAN:
        raise ValueError(f"stream {name!r}: index {index} is not in 0 ... {SPAN - 1}")
    return OFFSETS[name] + int(index)


def key(seed: int, name: str, index: int = 0) -> np.ndarray:
    """Key `index` of stream `name` of a seed [2] (uint32, a host array)."""
    root = jax.random.PRNGKey(int(seed))
    if name == "train":
        return np.asarray(root)
    return np.asarray(jax.random.fold_in(root, data(name, index)))


def keys(seeds, name: str, index: int = 0) -> np.ndarray:
    """[seeds, 2] keys of stream `name` at `index`, one per seed. Host inputs go in as
    numpy arrays: in a multi-host run every process passes the same values, which jit
    takes as replicated (a device array is process-local)."""
    return np.stack([key(s, name, index) for s in seeds])


def tick_keys(key):
    """A training tick's keys from the seed's running key: (next key, policy key, env
    key) [3, 2] (jittable)."""
    return jax.random.split(key, 3)


def episode_keys(key, limit: int):
    """An episode's keys from its stream key: (reset key [2], step keys [limit, 2]); tick t
    of every episode played from `key` takes step key t (jittable)."""
    k_init, k_run = jax.random.split(key)
    return k_init, jax.random.split(k_run, limit)


def step_keys(key):
    """An episode tick's keys from its step key: (policy key, env key) [2, 2] (jittable)."""
    return jax.random.split(key)
