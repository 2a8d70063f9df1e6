"""Train-ratio schedule against the protocol's numbers and a simulation of the reference."""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.data import schedule as sch


def _max_updates_per_tick(s):
    """An upper bound on `updates_owed` over all ticks. After the gate tick a tick owes
    floor(x + E p / q) - floor(x) <= ceil(E p / q); the gate tick owes 1 + floor(k p / q)
    for its k <= E - 1 rows after t0."""
    E, p, q = s.num_envs, s.ratio_num, s.ratio_den
    if p == 0:
        return 0
    return max(-(-E * p // q), 1 + (E - 1) * p // q)


def _protocol():
    return sch.make_schedule(train_ratio=512.0, batch_size=16, batch_length=64,
                             replay_context=1, num_envs=16)


class _RefRatio:
    """embodied/core/when.py:26-42 re-stated: float `prev`, or exact with Fraction."""

    def __init__(self, ratio):
        self.ratio, self.prev = ratio, None

    def __call__(self, step):
        if self.ratio == 0:
            return 0
        if self.prev is None:
            self.prev = step
            return 1
        repeats = int((step - self.prev) * self.ratio)
        self.prev += repeats / self.ratio
        return repeats


def _simulate_reference(num_envs, train_ratio, batch_size, batch_length, context, ticks,
                        exact, train_fill=0):
    """Per-row loop of embodied/run/train.py:69-92 with the replay reduced to item counts.

    Returns the cumulative update count at the end of every tick.
    """
    length = batch_length + context
    ratio = Fraction(train_ratio) / (batch_size * batch_length)
    should_train = _RefRatio(ratio if exact else float(ratio))
    stream = [0] * num_envs
    items, step, total, out = 0, 0, 0, []
    for _ in range(ticks):
        for env in range(num_envs):
            step += 1  # train.py:69, first callback
            stream[env] += 1  # replay.add: an item once the stream holds a window
            if stream[env] >= length:
                items += 1
            if items < batch_size or step < train_fill:  # train.py:82
                continue
            total += should_train(step)
        out.append(total)
    return out


def test_protocol_numbers():
    s = _protocol()
    assert (s.ratio_num, s.ratio_den, s.gate_rows) == (1, 2, 1040)
    assert sch.total_updates(s, 1039) == 0
    assert sch.total_updates(s, 1040) == 1
    assert sch.total_updates(s, 20000) == 9481
    assert [sch.total_updates(s, n) for n in (400, 800, 1200)] == [0, 0, 81]
    for n in range(0, 20001, 16):
        want = 0 if n < 1040 else 1 + (n - 1040) // 2
        assert sch.total_updates(s, n) == want
    assert _max_updates_per_tick(s) == 8


def test_protocol_per_tick_inside_scan():
    s = _protocol()

    def tick(total, t):
        owed = sch.updates_owed(s, t)
        return total + owed, (owed, total + owed)

    _, (owed, cum) = jax.jit(lambda: jax.lax.scan(tick, jnp.int32(0), jnp.arange(1250)))()
    owed, cum = np.asarray(owed), np.asarray(cum)
    assert owed.dtype == np.int32 and owed.max() <= _max_updates_per_tick(s)
    assert cum[-1] == 9481 and np.all(owed[:64] == 0) and owed[64] == 1
    np.testing.assert_array_equal(owed[65:], 8)
    # Evaluation every 400 rows = every 25 ticks.
    assert [int(cum[25 * k - 1]) for k in (1, 2, 3)] == [0, 0, 81]
    np.testing.assert_array_equal(
        cum, np.asarray(sch.total_updates(s, 16 * (jnp.arange(1250) + 1))))


def test_matches_reference_simulation_protocol():
    ref = _simulate_reference(16, 512.0, 16, 64, 1, 1250, exact=False)
    s = _protocol()
    assert [sch.total_updates(s, 16 * (t + 1)) for t in range(1250)] == ref


@pytest.mark.parametrize(
    "num_envs, train_ratio, batch_size, batch_length, context, train_fill",
    [
        (4, 32.0, 16, 64, 1, 0),
        (1, 64.0, 16, 64, 1, 0),
        (3, 7.5, 4, 8, 1, 0),
        (8, 100.0, 16, 64, 1, 0),
        (5, 1000.0, 2, 8, 1, 0),
        (2, 0.3, 3, 5, 0, 0),
        (16, 512.0, 16, 64, 1, 3000),
        (6, 0.0, 4, 8, 1, 0),
    ])
def test_matches_reference_simulation_generic(num_envs, train_ratio, batch_size,
                                              batch_length, context, train_fill):
    ticks = 20000 // num_envs
    s = sch.make_schedule(train_ratio=train_ratio, batch_size=batch_size,
                          batch_length=batch_length, replay_context=context,
                          num_envs=num_envs, train_fill=train_fill)
    ours = [sch.total_updates(s, num_envs * (t + 1)) for t in range(ticks)]
    exact = _simulate_reference(num_envs, train_ratio, batch_size, batch_length, context,
                                ticks, exact=True, train_fill=train_fill)
    assert ours == exact
    # The literal float version: its `prev += repeats / ratio` is exact when 1 / ratio is a
    # binary fraction (p a power of two); otherwise it can fall one ulp behind, so at some
    # tick ends it has run one update fewer, caught up on the next row. Never more.
    floaty = _simulate_reference(num_envs, train_ratio, batch_size, batch_length, context,
                                 ticks, exact=False, train_fill=train_fill)
    lag = np.asarray(ours) - np.asarray(floaty)
    assert lag.min() >= 0 and lag.max() <= 1
    if s.ratio_num & (s.ratio_num - 1) == 0:
        assert ours == floaty
    jitted = np.asarray(jax.jit(lambda t: sch.total_updates(s, num_envs * (t + 1)))(
        jnp.arange(ticks)))
    np.testing.assert_array_equal(jitted, ours)
    owed = np.asarray(jax.jit(jax.vmap(lambda t: sch.updates_owed(s, t)))(jnp.arange(ticks)))
    np.testing.assert_array_equal(np.cumsum(owed), ours)
    assert owed.max() <= _max_updates_per_tick(s)


def test_gate_rows_and_items():
    assert sch.items_after(1039, 16, 65) == 15 and sch.items_after(1040, 16, 65) == 16
    assert sch.gate_rows(16, 16, 65) == 1040
    assert sch.gate_rows(4, 16, 65) == 272  # tick 67, env 3: 12 + 4 items
    assert sch.gate_rows(16, 16, 65, train_fill=5000) == 5000


def test_no_overflow_on_long_runs():
    s = sch.make_schedule(train_ratio=1000.0, batch_size=16, batch_length=64,
                          replay_context=1, num_envs=16)
    assert (s.ratio_num, s.ratio_den) == (125, 128)
    rows = 2_000_000_000
    assert int(jax.jit(lambda r: sch.total_updates(s, r))(jnp.int32(rows))) == \
        sch.total_updates(s, rows)


def test_bad_config_rejected():
    with pytest.raises(ValueError):
        sch.make_schedule(train_ratio=-1.0, batch_size=16, batch_length=64,
                          replay_context=1, num_envs=16)
