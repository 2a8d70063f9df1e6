"""On-device replay: one ring of rows per env, online queue first, then uniform items.

Reference behaviour (embodied/replay/replay.py @29eb964) and how it maps here:

* Items. A worker's stream makes one item per added row once it holds `length` rows
  (replay.py:130-138): the item starting at row s is inserted when row s + length - 1 is
  added. So after c rows an env has items s = 0 .. c - length, every window of `length`
  consecutive rows. Here an env's ring holds its last `capacity` rows, and an item is valid
  while all its rows are held: s >= max(0, c - capacity) and s + length <= c. Windows never
  cross the write head and never contain an unwritten row.
* Online queue (replay.py:140-144, 178-182). When a worker adds its row r (0-based) and
  that add inserts an item (r >= length - 1), the item is also queued if r % length == 0:
  the queue receives the non-overlapping windows s = 1, 1 + length, 1 + 2 length, ...,
  each as soon as it is complete. Samples pop the queue first (FIFO) and draw uniformly
  only once it is empty; a queued item whose rows are gone is skipped (the reference's
  KeyError retry, replay.py:190-191).
  Because `replay_add` writes one row to every env per tick, all envs hold the same count,
  and the queue's contents are a fixed function of that count: entry j (in push order,
  env-major within a tick as the driver adds envs 0..E-1) is env j % E, start
  1 + length * (j // E). The queue is therefore one int32, the number of entries already
  consumed; it has no storage, never overflows and never drops an item (the reference's
  queue is unbounded too). Entries overwritten by the ring before they were sampled are
  skipped arithmetically.
* Uniform (selectors.Uniform): every valid item equally likely, with replacement. The
  count of valid items per env is closed-form, so a draw is one integer and a search over
  E cumulative counts: O(E) per item, never O(capacity).
* Batch annotation (replay.py:303-317): row 0 of every window gets is_first, and a row
  followed by an is_first row gets is_last (a no-op for collector rows, kept for parity).
* Latent write-back (agent.py:197-202, replay.py:146-167, 242-261): the posterior deter /
  stoch of the trained rows 1 .. length - 1 of each sampled window replace the stored ones,
  only where the ring still holds those rows; where two windows of a batch cover the same
  row the later batch element wins, as the reference's sequential loop.

Difference kept: the reference caps the number of items globally (capacity in items,
FIFO removal); here capacity is rows per env. With lockstep envs both drop the oldest data
first. Not sampleable before `replay_can_sample` (the reference's `len(replay) >=
batch_size` gate, embodied/run/train.py:82).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class ReplayState:
    """Rows of every env; vmap over seeds adds a leading axis to every array.

    data: key -> [E, capacity, ...] (the replay row schema of schema.py; `obs` may be a
    dict of arrays); row r of env e lives at slot r % capacity.
    count: [E] int32 rows written per env (all equal: one row per env per add).
    online_head: [] int32 online-queue entries consumed (popped or skipped).
    """

    data: dict[str, jax.Array]
    count: jax.Array
    online_head: jax.Array
    capacity: int = struct.field(pytree_node=False)
    length: int = struct.field(pytree_node=False)

    @property
    def num_envs(self) -> int:
        return self.count.shape[-1]


class ReplayIndex(NamedTuple):
    """Where sampled windows start: env [B] int32, start [B] int32 (absolute row index)."""

    env: jax.Array
    start: jax.Array


def replay_init(num_envs: int, capacity: int, example_row: dict, length: int = 65
                ) -> ReplayState:
    """Empty rings of `capacity` rows per env shaped like `example_row` (one env's row).

    `length` is the window length (batch_length + replay_context = 65 in the protocol);
    it is static because the online queue depends on it.
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    if capacity < length:
        raise ValueError(
            f"replay capacity {capacity} rows per env is shorter than one window of {length}")
    missing = {"is_first", "is_last", "deter", "stoch"} - set(example_row)
    if missing:
        raise ValueError(f"replay rows need the schema's keys; missing {sorted(missing)}")
    data = jax.tree.map(
        lambda v: jnp.zeros((num_envs, capacity, *jnp.shape(v)), jnp.asarray(v).dtype),
        example_row)
    return ReplayState(
        data=data,
        count=jnp.zeros((num_envs,), jnp.int32),
        online_head=jnp.zeros((), jnp.int32),
        capacity=int(capacity),
        length=int(length),
    )


def replay_add(state: ReplayState, rows: dict) -> ReplayState:
    """Write one row per env (`rows[k]` [E, ...]) at slot count % capacity."""
    envs = jnp.arange(state.num_envs)
    slots = state.count % state.capacity
    data = jax.tree.map(lambda v, r: v.at[envs, slots].set(jnp.asarray(r, v.dtype)),
                        state.data, rows)
    return state.replace(data=data, count=state.count + 1)


def replay_grow(state: ReplayState, capacity: int) -> ReplayState:
    """The same rows in rings of a larger `capacity` (a resumed run whose --steps grew).

    Only a ring that never wrapped can grow: its row r sits at slot r, which is also its
    slot in the larger ring. A leading seed axis is allowed."""
    if capacity < state.capacity:
        raise ValueError(f"replay capacity cannot shrink ({state.capacity} -> {capacity})")
    if capacity == state.capacity:
        return state
    if int(jnp.max(state.count)) > state.capacity:
        raise ValueError("the replay ring has wrapped; it cannot grow without reordering")
    axis = state.count.ndim  # the slot axis follows the env axis (and a seed axis)
    pad = capacity - state.capacity

    def grow(v):
        widths = [(0, 0)] * v.ndim
        widths[axis] = (0, pad)
        return jnp.pad(v, widths)

    return ReplayState(data=jax.tree.map(grow, state.data), count=state.count,
                       online_head=state.online_head, capacity=int(capacity),
                       length=state.length)


def _rows_written(state: ReplayState) -> jax.Array:
    """Rows per env, c (the same for every env)."""
    return jnp.min(state.count)


def _valid_items(state: ReplayState) -> tuple[jax.Array, jax.Array]:
    """Per env: first valid start [E] and number of valid items [E]."""
    lo = jnp.maximum(state.count - state.capacity, 0)
    n = jnp.maximum(state.count - lo - state.length + 1, 0)
    return lo, n


def replay_num_items(state: ReplayState) -> jax.Array:
    """Valid items over all envs (the reference's len(replay))."""
    return jnp.sum(_valid_items(state)[1])


def replay_can_sample(state: ReplayState, batch_size: int, length: int | None = None
                      ) -> jax.Array:
    """The reference's training gate: len(replay) >= batch_size."""
    _check_length(state, length)
    return replay_num_items(state) >= batch_size


def _check_length(state: ReplayState, length: int | None) -> None:
    if length is not None and length != state.length:
        raise ValueError(f"window length {length} != the replay's length {state.length}")


def _online_window(state: ReplayState) -> tuple[jax.Array, jax.Array]:
    """First live queue entry and one past the last pushed entry (both in push order)."""
    c = _rows_written(state)
    E, L = state.num_envs, state.length
    # Windows start 1 + L m for m = 0 .. (c - 1) // L - 1 (pushed when row L (m + 1) lands).
    tail = E * jnp.maximum((c - 1) // L, 0)
    lo = jnp.maximum(c - state.capacity, 0)
    # The first m whose window still starts inside the ring: 1 + L m >= lo.
    m_min = jnp.maximum((lo - 1 + L - 1) // L, 0)
    head = jnp.maximum(state.online_head, E * m_min)
    return head, jnp.maximum(tail, head)


def replay_online_pending(state: ReplayState) -> jax.Array:
    """Queued items not yet sampled (live ones only)."""
    head, tail = _online_window(state)
    return tail - head


def replay_sample(state: ReplayState, key: jax.Array, batch_size: int,
                  length: int | None = None) -> tuple[ReplayState, dict, ReplayIndex]:
    """Draw `batch_size` windows: online queue first, then uniform with replacement.

    Returns the state with the consumed queue entries popped, the batch (key -> [B, length,
    ...]) and where each window starts. Call only when `replay_can_sample`.
    """
    _check_length(state, length)
    E, L, B = state.num_envs, state.length, batch_size
    head, tail = _online_window(state)
    taken = jnp.minimum(tail - head, B)
    j = head + jnp.arange(B, dtype=jnp.int32)
    q_env, q_start = j % E, 1 + L * (j // E)

    lo, n = _valid_items(state)
    cum = jnp.cumsum(n)
    u = jax.random.randint(key, (B,), 0, jnp.maximum(cum[-1], 1))
    u_env = jnp.searchsorted(cum, u, side="right").astype(jnp.int32)
    u_env = jnp.minimum(u_env, E - 1)
    u_start = lo[u_env] + u - (cum[u_env] - n[u_env])

    online = jnp.arange(B) < taken
    env = jnp.where(online, q_env, u_env).astype(jnp.int32)
    start = jnp.where(online, q_start, u_start).astype(jnp.int32)
    slots = (start[:, None] + jnp.arange(L)) % state.capacity  # [B, L]
    batch = jax.tree.map(lambda v: v[env[:, None], slots], state.data)
    batch = _annotate(batch)
    state = state.replace(online_head=(head + taken).astype(jnp.int32))
    return state, batch, ReplayIndex(env, start)


def _annotate(batch: dict) -> dict:
    """is_first on every window's first row; is_last before any is_first (replay.py:303-317)."""
    is_first = batch["is_first"].at[:, 0].set(True)
    next_first = jnp.concatenate(
        [is_first[:, 1:], jnp.zeros_like(is_first[:, :1])], axis=1)
    return dict(batch, is_first=is_first, is_last=batch["is_last"] | next_first)


def replay_write_latents(state: ReplayState, index: ReplayIndex, deter: jax.Array,
                         stoch: jax.Array) -> ReplayState:
    """Store the trained rows' posterior latents back into the ring.

    deter [B, T, D] f32 and stoch [B, T, S] int32 belong to the last T rows of each window,
    rows start + K .. start + L - 1 with K = L - T the replay context (K = 1: rows 1..64).
    Rows the ring no longer holds are left alone; where windows of the batch overlap, the
    later batch element's value is written.
    """
    B, T = deter.shape[:2]
    K = state.length - T
    if not 0 <= K < state.length or stoch.shape[:2] != (B, T):
        raise ValueError(f"latents of {T} rows do not fit windows of {state.length}")
    rows = index.start[:, None] + K + jnp.arange(T)  # [B, T]
    held = rows >= (state.count[index.env] - state.capacity)[:, None]
    # Superseded: a later batch element of the same env also covers this row.
    rel = rows[:, :, None] - index.start[None, None, :] - K  # [B, T, B']
    covers = (rel >= 0) & (rel < T)
    later = jnp.arange(B)[None, None, :] > jnp.arange(B)[:, None, None]
    same_env = (index.env[:, None] == index.env[None, :])[:, None, :]
    superseded = jnp.any(covers & later & same_env, axis=-1)
    write = held & ~superseded
    # Rows not written go to slot `capacity`, out of bounds, which mode="drop" discards.
    slots = jnp.where(write, rows % state.capacity, state.capacity)
    envs = jnp.broadcast_to(index.env[:, None], slots.shape)
    data = dict(state.data)
    for k, v in (("deter", deter), ("stoch", stoch)):
        data[k] = data[k].at[envs, slots].set(v.astype(data[k].dtype), mode="drop")
    return state.replace(data=data)
