"""Train-ratio schedule: how many updates each tick owes (protocol 3.3, rows 41-42, U3).

Reference (embodied/run/train.py:26-28, 81-92; embodied/core/when.py:26-42): after every
single row that any env adds (`step` counts rows over all envs), `train_step` runs

    if len(replay) < batch_size or step < train_fill: no update
    else: run Ratio(ratio)(step) updates,  ratio = train_ratio / (batch_size * trained rows)

where Ratio returns 1 on its first call (remembering prev = that step) and afterwards
int((step - prev) * ratio), advancing prev by repeats / ratio. `len(replay)` counts items,
which an env makes once it holds a full window (embodied/replay/replay.py:130-138).

In exact arithmetic, with the first call at row t0 (the gate), the cumulative count after
row N is

    total(N) = 0                                    N < t0
             = 1 + floor((N - t0) * ratio)          N >= t0

because floor-with-remainder steps chain exactly. We evaluate that closed form with the
ratio as a fraction p / q of integers: no float drift, no carried state, and a tick
(E rows, all added before its updates run: deviation U3) owes total(E (t + 1)) - total(E t).
The cumulative counts at tick ends are what we match. The reference keeps `prev` as a
float: exact when 1 / ratio is a binary fraction (the protocol's 1/2), otherwise it can lag
the exact count by one update at a tick end, made up on the next row (tests/test_schedule.py
measures at most 1, never more).

Protocol numbers (16 envs, train ratio 512, batch 16 x 64 trained rows): ratio 1/2,
t0 = 1040 (env 15 completes the 16th 65-row window at tick 64), 9481 updates by 20000 rows.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import jax.numpy as jnp

from dreamerjax.config.defaults import HEAD_REF, REF_29EB964

_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class TrainSchedule:
    """Static facts of the schedule (hashable, safe as a jit static argument).

    ratio_num / ratio_den: updates per row in lowest terms (p / q).
    gate_rows: t0, the row count (all envs together, 1-based) at which the first update
        is owed; 0 updates are owed before it.
    """

    num_envs: int
    ratio_num: int
    ratio_den: int
    gate_rows: int


def _as_fraction(x: float | int | Fraction) -> Fraction:
    """A config number as a fraction: 512.0 -> 512, 0.3 -> 3/10 (its decimal spelling)."""
    if isinstance(x, Fraction | int):
        return Fraction(x)
    return Fraction(repr(float(x)))


def items_after(rows: int, num_envs: int, length: int) -> int:
    """Replay items (windows of `length`) once `rows` rows were added, envs in turn."""
    full, part = divmod(rows, num_envs)
    per_env = lambda c: max(0, c - length + 1)  # noqa: E731
    return part * per_env(full + 1) + (num_envs - part) * per_env(full)


def gate_rows(num_envs: int, batch_size: int, length: int, train_fill: int = 0,
              min_items: int | None = None) -> int:
    """Smallest row count n >= max(1, train_fill) with items_after(n) >= min_items
    (default batch_size)."""
    lo_bound = max(1, train_fill)
    need = batch_size if min_items is None else min_items
    ok = lambda n: n >= lo_bound and items_after(n, num_envs, length) >= need  # noqa: E731
    hi = lo_bound
    while not ok(hi):
        hi *= 2
    lo = lo_bound
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def make_schedule(*, train_ratio: float, batch_size: int, batch_length: int,
                  replay_context: int, num_envs: int, train_fill: int = 0,
                  min_items: int | None = None) -> TrainSchedule:
    """Build the schedule.

    batch_length: trained rows per sequence (RunConfig.batch_length, 64; the reference's
    batch_length 65 minus replay_context). Windows are batch_length + replay_context rows.
    min_items: replay items before the first update (default batch_size, 29eb964's
    embodied/run/train.py:82; HEAD's is batch_size * batch_length, train.py:71 @e3f0224).
    """
    if train_ratio < 0:
        raise ValueError(f"train_ratio must be >= 0, got {train_ratio}")
    if min(batch_size, batch_length, num_envs) < 1 or replay_context < 0:
        raise ValueError("batch_size, batch_length, num_envs must be >= 1, replay_context >= 0")
    ratio = _as_fraction(train_ratio) / (batch_size * batch_length)
    p, q = ratio.numerator, ratio.denominator
    if p * q > _INT32_MAX or p * num_envs > _INT32_MAX:
        raise ValueError(f"train ratio {train_ratio} gives updates per row {ratio}, too fine "
                         "a fraction for int32 arithmetic; round the train ratio")
    t0 = gate_rows(num_envs, batch_size, batch_length + replay_context, train_fill, min_items)
    return TrainSchedule(num_envs=num_envs, ratio_num=p, ratio_den=q, gate_rows=t0)


def schedule_from_config(run, reference: str = REF_29EB964) -> TrainSchedule:
    """The schedule of a RunConfig (train_ratio, batch_size, batch_length, replay_context,
    num_envs; train_fill if present) for the reference version's replay gate."""
    return make_schedule(
        train_ratio=run.train_ratio, batch_size=run.batch_size,
        batch_length=run.batch_length, replay_context=run.replay_context,
        num_envs=run.num_envs, train_fill=run.train_fill,
        min_items=run.batch_size * run.batch_length if reference == HEAD_REF else None)


def total_updates(s: TrainSchedule, rows):
    """Cumulative updates owed once `rows` rows (all envs) were added.

    A Python int gives an int (exact, any size); an integer array gives int32 (jittable).
    """
    p, q, t0 = s.ratio_num, s.ratio_den, s.gate_rows
    if isinstance(rows, int):
        if p == 0 or rows < t0:
            return 0
        return 1 + (rows - t0) * p // q
    rows = jnp.asarray(rows, jnp.int32)
    if p == 0:
        return jnp.zeros_like(rows)
    a = jnp.maximum(rows - t0, 0)
    # floor(a p / q) without forming a p, which could overflow int32.
    n = (a // q) * p + ((a % q) * p) // q
    return jnp.where(rows >= t0, 1 + n, 0).astype(jnp.int32)


def updates_owed(s: TrainSchedule, tick):
    """Updates to run after tick `tick` (0-based; its num_envs rows are already added)."""
    if not isinstance(tick, int):
        tick = jnp.asarray(tick, jnp.int32)
    return total_updates(s, s.num_envs * (tick + 1)) - total_updates(s, s.num_envs * tick)
