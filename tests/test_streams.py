"""The named key streams of a run (run/streams.py): no two streams share a key."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from dreamerjax.run import streams


def test_no_two_streams_can_coincide():
    # Each folding stream owns the integers [offset, offset + SPAN): disjoint ranges.
    ranges = sorted((streams.OFFSETS[n], streams.OFFSETS[n] + streams.SPAN, n)
                    for n in streams.OFFSETS)
    for (_, end, a), (start, _, b) in itertools.pairwise(ranges):
        assert end <= start, (a, b)
    assert ranges[0][0] >= streams.SPAN  # above every index, so 0 ... SPAN - 1 stay free
    # Their ends are where an index may go: the first and last index of each.
    for name in streams.OFFSETS:
        assert streams.data(name, 0) == streams.OFFSETS[name]
        assert streams.data(name, streams.SPAN - 1) < streams.OFFSETS[name] + streams.SPAN
        with pytest.raises(ValueError, match="is not in 0"):
            streams.data(name, streams.SPAN)
        with pytest.raises(ValueError, match="is not in 0"):
            streams.data(name, -1)
    # Concretely, for a few seeds: the first and last keys of every stream are distinct.
    for seed in (0, 1, 7):
        seen = {}
        for name in streams.STREAMS:
            for index in ((0,) if name == "train" else (0, streams.SPAN - 1)):
                k = streams.key(seed, name, index).tobytes()
                assert k not in seen, (name, index, seen.get(k))
                seen[k] = (name, index)


def test_evaluate_run_no_longer_draws_the_first_report_key():
    """`dreamerjax eval` used the evaluation key of log index 10**6, which is the first
    log point's report key; its own stream differs from both."""
    seed = 3
    old = np.asarray(jax.random.fold_in(jax.random.PRNGKey(seed), 10**6 + 10**6))
    assert np.array_equal(old, streams.key(seed, "report", 0))
    assert not np.array_equal(streams.key(seed, "evaluate_run"), streams.key(seed, "report"))


def test_training_streams_keep_their_keys():
    """The streams a run's records depend on are the integers they always were."""
    root = jax.random.PRNGKey(5)
    assert np.array_equal(streams.key(5, "train"), np.asarray(root))
    assert np.array_equal(streams.key(5, "eval", 4),
                          np.asarray(jax.random.fold_in(root, 1_000_000 + 4)))
    assert np.array_equal(streams.key(5, "report", 4),
                          np.asarray(jax.random.fold_in(root, 2_000_000 + 4)))
    assert np.array_equal(streams.key(5, "video"),
                          np.asarray(jax.random.fold_in(root, 3_000_000)))
    assert streams.keys((5, 6), "eval", 1).shape == (2, 2)
