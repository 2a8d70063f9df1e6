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

* Selectors (replay.fracs; embodied/replay/selectors.py @29eb964, main.py:174-185): with a
  `Selector` whose priority or recency fraction is positive, the draws after the online
  queue come from the mixture sum_k fracs[k] p_k over the stored items instead, with the
  reference's probabilities for the same history of inserts, samples and priority updates
  (tests/data/reference_replay). The reference's selectors key items by insertion order;
  with lockstep envs an item (env e, start s) is the (s E + e)-th insert, so its age, and
  its leaf in the Prioritized selector's 16-ary sample tree, are closed-form:
  - Uniform: 1 / n over the n stored items.
  - Recency: index a drawn with weight 1 / (a + 1)^recexp over a table of `size` entries
    (the reference's replay capacity in items); while fewer items are stored, index a
    maps to age floor(a / size * n) (selectors.py:61-67). Age 0 is the newest item.
  - Prioritized: a priority per stored row (`initial` when the row is added); an item's
    weight is maxfrac max(x) + (1 - maxfrac) mean(x) of x = prio^exponent over its
    window's rows (selectors.py:170-180). The sample tree fills leaves left to right;
    removing the oldest item moves the last leaf into its place before the new item
    goes last (replay.py:189-194, sampletree.py:39-58), so insert t sits at leaf t until
    the tree is full and at t mod (S - 1) afterwards, the newest at S - 1 (S items).
    A draw descends the tree choosing a child among the infinite ones if a node's total
    is infinite, uniformly if it is 0, else in proportion (sampletree.py:65-79); an
    item's probability is the product of those choices. zero_on_sample sets the rows of
    an item drawn by this selector to 0 (selectors.py:146-151), so such draws are
    sequential within a batch.

* Host memory (`memory="host"`, run.replay_memory): the ring's rows (`data`) live in host
  memory (JAX's pinned_host memory kind) and the program moves only what it uses: a tick's
  rows go to the host and are written with one dynamic_update_slice; a sampled window is
  two dynamic_slices of `length` rows (at its start, or the ring's last `length` rows when
  it wraps, and the ring's first `length` rows) moved to the device and joined there; the
  latent write-back reads, merges on the device and writes back the same two blocks, one
  window after another (so the later batch element wins, as above). Nothing is computed
  on host-resident arrays (XLA's host offloading moves slices, it does not compute on
  them); the counters and priorities stay on the device. Vmapped over seeds, these moves
  run as a loop over the seeds (custom_vmap), so the seed index is an explicit slice index
  rather than a gather. The numbers are those of the device ring, bit for bit.

* Rows changed after they were written (`dirty`): the latent write-back changes the stored
  deter / stoch of rows the run has already collected (and written to its replay files,
  run/replay_files.py). A bool per row [E, capacity] marks every row whose latents were
  written back since the mask was last cleared, so a checkpoint can save the latents of
  those rows alone rather than the ring; a row added to a slot clears its mark.
  Priorities are part of the
  state a checkpoint keeps whole (`prio`); the mask changes no number of the run.

Difference kept: the reference caps the number of items globally (capacity in items,
FIFO removal); here capacity is rows per env. With lockstep envs both drop the oldest data
first. Not sampleable before `replay_num_items` reaches the batch size (the reference's
`len(replay) >= batch_size` gate, embodied/run/train.py:82; data.schedule.gate_rows).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dreamerjax.config.defaults import RunConfig

# Where a replay's rows live (ReplayState.memory, run.replay_memory).
MEMORIES = ("device", "host")


@dataclasses.dataclass(frozen=True)
class Selector:
    """The reference's replay.fracs mixture with replay.prio and replay.recexp.

    size: the recency table's length, the reference's replay capacity in items (0: the
    ring's, num_envs * (capacity - length + 1)), for `envs` envs; a replay that holds a
    part of the envs (a data shard) takes the same part of the table.
    """

    # The defaults are RunConfig's, so a Selector built by hand means what the flags mean.
    uniform: float = RunConfig.replay_uniform
    priority: float = RunConfig.replay_priority
    recency: float = RunConfig.replay_recency
    exponent: float = RunConfig.replay_prio_exponent
    maxfrac: float = RunConfig.replay_prio_maxfrac
    initial: float = RunConfig.replay_prio_initial
    zero_on_sample: bool = RunConfig.replay_prio_zero_on_sample
    recexp: float = RunConfig.replay_recexp
    size: int = 0
    envs: int = 0

    def __post_init__(self):
        fracs = (self.uniform, self.priority, self.recency)
        if min(fracs) < 0 or abs(sum(fracs) - 1.0) > 1e-6:
            raise ValueError(f"replay.fracs must be >= 0 and sum to 1, got {fracs}")
        if not 0 <= self.maxfrac <= 1:
            raise ValueError(f"replay.prio.maxfrac must be in [0, 1], got {self.maxfrac}")

    @property
    def uniform_only(self) -> bool:
        return self.priority == 0 and self.recency == 0


def selector_from_run(run) -> Selector | None:
    """The Selector of a RunConfig's replay.fracs / replay.prio / replay.recexp, or None
    for uniform replay. The recency table has the reference's replay capacity in items,
    replay.size (the ring's own when run.replay_capacity sets it in rows)."""
    if run.replay_priority == 0 and run.replay_recency == 0:
        return None
    return Selector(
        uniform=run.replay_uniform, priority=run.replay_priority,
        recency=run.replay_recency, exponent=run.replay_prio_exponent,
        maxfrac=run.replay_prio_maxfrac, initial=run.replay_prio_initial,
        zero_on_sample=run.replay_prio_zero_on_sample, recexp=run.replay_recexp,
        size=0 if run.replay_capacity else int(run.replay_size), envs=run.num_envs)


@struct.dataclass
class ReplayState:
    """Rows of every env; vmap over seeds adds a leading axis to every array.

    data: key -> [E, capacity, ...] (the replay row schema of schema.py; `obs` may be a
    dict of arrays); row r of env e lives at slot r % capacity.
    count: [E] int32 rows written per env (all equal: one row per env per add).
    online_head: [] int32 online-queue entries consumed (popped or skipped).
    prio: [E, capacity] float32 priority of every stored row, or None (uniform replay,
    `selector` None: the default state and program carry nothing of the selectors).
    dirty: [E, capacity] bool, the rows whose latents were written back since the mask
    was last cleared (module docstring), or None (a state made without one).
    memory: where `data` lives, "device" or "host" (pinned host memory; the module
    docstring): the functions below move rows to and from it accordingly.
    """

    data: dict[str, jax.Array]
    count: jax.Array
    online_head: jax.Array
    capacity: int = struct.field(pytree_node=False)
    length: int = struct.field(pytree_node=False)
    prio: jax.Array | None = None
    selector: Selector | None = struct.field(pytree_node=False, default=None)
    memory: str = struct.field(pytree_node=False, default="device")
    dirty: jax.Array | None = None

    @property
    def num_envs(self) -> int:
        return self.count.shape[-1]


class ReplayIndex(NamedTuple):
    """Where sampled windows start: env [B] int32, start [B] int32 (absolute row index)."""

    env: jax.Array
    start: jax.Array


def replay_init(num_envs: int, capacity: int, example_row: dict, length: int = 65,
                selector: Selector | None = None, memory: str = "device") -> ReplayState:
    """Empty rings of `capacity` rows per env shaped like `example_row` (one env's row).

    `length` is the window length (batch_length + replay_context = 65 in the protocol);
    it is static because the online queue depends on it. A selector that is uniform only
    is dropped: the state is exactly the uniform replay's. memory: "device" or "host",
    where the state's `data` is to be placed (the caller places it; the functions below
    only read it).
    """
    if memory not in MEMORIES:
        raise ValueError(f"run.replay_memory: {memory!r}; choose one of {', '.join(MEMORIES)}")
    if selector is not None and selector.uniform_only:
        selector = None
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
    prio = None if selector is None else jnp.zeros((num_envs, capacity), jnp.float32)
    return ReplayState(
        data=data,
        count=jnp.zeros((num_envs,), jnp.int32),
        online_head=jnp.zeros((), jnp.int32),
        capacity=int(capacity),
        length=int(length),
        prio=prio,
        selector=selector,
        memory=memory,
        dirty=jnp.zeros((num_envs, capacity), bool),
    )


def replay_add(state: ReplayState, rows: dict) -> ReplayState:
    """Write one row per env (`rows[k]` [E, ...]) at slot count % capacity."""
    if state.memory == "host":  # every env's count is the same: one slot for all
        rows = jax.tree.map(lambda v, r: jnp.asarray(r, v.dtype), state.data, rows)
        rows = jax.tree.map(lambda r: r[None], rows)  # one item: this tick's rows
        slot = (state.count[0] % state.capacity)[None]
        data = _host_op(_write_rows, writes=True)(state.data, rows, slot)
        return _added(state, data)
    envs = jnp.arange(state.num_envs)
    slots = state.count % state.capacity
    data = jax.tree.map(lambda v, r: v.at[envs, slots].set(jnp.asarray(r, v.dtype)),
                        state.data, rows)
    return _added(state, data)


def replay_fill(state: ReplayState, rows: dict, online: bool = True) -> ReplayState:
    """The state after replay_add of T ticks of rows, `rows[k]` [E, T, ...] (tick t's
    rows at [:, t]), bit for bit, written at once: only the last `capacity` ticks reach
    the ring. One seed's state (no seed axis); numpy leaves stay numpy (a host replay
    before it is placed), others become jax arrays.

    online=False then empties the online queue (every entry pushed so far counts as
    consumed): a replay filled from files queues nothing, as the reference's Replay.load
    inserts the items of loaded chunks without queueing them (embodied/core/replay.py:
    353-359 @e3f0224)."""
    ticks = {int(jnp.shape(v)[1]) for v in jax.tree.leaves(rows)}
    if len(ticks) != 1:
        raise ValueError(f"rows need one time axis of the same length, got {sorted(ticks)}")
    T = ticks.pop()
    E, cap = state.num_envs, state.capacity
    n = min(T, cap)
    count = np.asarray(state.count).astype(np.int64)
    slots = (int(count[0]) + np.arange(T - n, T)) % cap  # distinct: n <= cap

    def fill(v, r):
        r = r[:, T - n:]
        if isinstance(v, np.ndarray):
            out = v.copy()
            out[:, slots] = np.asarray(r, v.dtype)
            return out
        return jnp.asarray(v).at[:, slots].set(jnp.asarray(r, v.dtype))

    data = jax.tree.map(fill, state.data, rows)
    new = state.replace(data=data, count=jnp.asarray(count + T, jnp.int32))
    if state.prio is not None:
        prio = jnp.asarray(state.prio).at[:, slots].set(jnp.float32(state.selector.initial))
        new = new.replace(prio=prio)
    if not online:  # the queue's tail, _online_window's: E entries per window of L rows
        tail = E * jnp.maximum((new.count[0] - 1) // state.length, 0)
        new = new.replace(online_head=jnp.maximum(new.online_head, tail).astype(jnp.int32))
    return new


def _added(state: ReplayState, data: dict) -> ReplayState:
    """The state after replay_add wrote `data`: the counts, priorities and (clear) dirty
    marks of the new row."""
    if state.dirty is not None:
        envs, slots = jnp.arange(state.num_envs), state.count % state.capacity
        state = state.replace(dirty=state.dirty.at[envs, slots].set(False))
    if state.prio is not None:  # a new row starts at the selector's initial priority
        envs, slots = jnp.arange(state.num_envs), state.count % state.capacity
        prio = state.prio.at[envs, slots].set(jnp.float32(state.selector.initial))
        return state.replace(data=data, count=state.count + 1, prio=prio)
    return state.replace(data=data, count=state.count + 1)


def replay_grow(state: ReplayState, capacity: int) -> ReplayState:
    """The same rows in rings of a larger `capacity` (a resumed run whose --steps grew).

    Only a ring that never wrapped can grow: its row r sits at slot r, which is also its
    slot in the larger ring. A leading seed axis is allowed; numpy leaves (a host replay
    fetched from its memory) grow as numpy arrays, on the host."""
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
        return np.pad(v, widths) if isinstance(v, np.ndarray) else jnp.pad(v, widths)

    prio = None if state.prio is None else grow(state.prio)
    dirty = None if state.dirty is None else grow(state.dirty)
    data = None if state.data is None else jax.tree.map(grow, state.data)
    return ReplayState(data=data, count=state.count,
                       online_head=state.online_head, capacity=int(capacity),
                       length=state.length, prio=prio, selector=state.selector,
                       memory=state.memory, dirty=dirty)


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


def replay_sample(state: ReplayState, key: jax.Array, batch_size: int,
                  length: int | None = None, seed: int | None = None
                  ) -> tuple[ReplayState, dict, ReplayIndex]:
    """Draw `batch_size` windows: online queue first, then uniform with replacement.

    Returns the state with the consumed queue entries popped, the batch (key -> [B, length,
    ...]) and where each window starts. Call only when `replay_num_items` >= batch_size.
    seed: a host replay's `data` still has its leading seed axis (the rest of the state is
    this seed's): the windows are read from that seed's rows, without moving the others.
    """
    _check_length(state, length)
    E, L, B = state.num_envs, state.length, batch_size
    head, tail = _online_window(state)
    taken = jnp.minimum(tail - head, B)
    j = head + jnp.arange(B, dtype=jnp.int32)
    q_env, q_start = j % E, 1 + L * (j // E)

    if state.selector is None:  # uniform: the program of a run without selectors
        lo, n = _valid_items(state)
        cum = jnp.cumsum(n)
        u = jax.random.randint(key, (B,), 0, jnp.maximum(cum[-1], 1))
        u_env = jnp.searchsorted(cum, u, side="right").astype(jnp.int32)
        u_env = jnp.minimum(u_env, E - 1)
        u_start = lo[u_env] + u - (cum[u_env] - n[u_env])
        online = jnp.arange(B) < taken
    else:
        online = jnp.arange(B) < taken
        state, u_env, u_start = _select(state, key, online)
    env = jnp.where(online, q_env, u_env).astype(jnp.int32)
    start = jnp.where(online, q_start, u_start).astype(jnp.int32)
    if state.memory == "host":
        read = functools.partial(_read_windows, length=L)
        if seed is None:
            batch = _host_op(read)(state.data, env, start % state.capacity)
        else:
            batch = read(state.data, jnp.full((B,), seed, jnp.int32), env,
                         start % state.capacity)
    else:
        slots = (start[:, None] + jnp.arange(L)) % state.capacity  # [B, L]
        batch = jax.tree.map(lambda v: v[env[:, None], slots], state.data)
    batch = _annotate(batch)
    state = state.replace(online_head=(head + taken).astype(jnp.int32))
    return state, batch, ReplayIndex(env, start)


def _item_starts(state: ReplayState) -> tuple[jax.Array, jax.Array]:
    """The item held at every start slot: start [E, capacity] int32 and valid [E, cap]."""
    lo, n = _valid_items(state)
    k = jnp.arange(state.capacity)
    start = lo[:, None] + (k[None, :] - lo[:, None]) % state.capacity
    return start.astype(jnp.int32), (start - lo[:, None]) < n[:, None]


def _window_rows(state: ReplayState, start: jax.Array) -> jax.Array:
    """Ring slots of every item's rows: [E, capacity, length]."""
    return (start[..., None] + jnp.arange(state.length)) % state.capacity


def _item_weights(state: ReplayState, start: jax.Array) -> jax.Array:
    """The Prioritized selector's weight of every item slot [E, capacity] (_aggregate)."""
    sel = state.selector
    rows = _window_rows(state, start)
    x = jnp.take_along_axis(state.prio[:, None, :], rows, axis=-1)  # [E, cap, L]
    if sel.exponent != 1.0:
        x = x ** jnp.float32(sel.exponent)
    mean = jnp.sum(x, -1) / state.length
    if sel.maxfrac:
        return sel.maxfrac * jnp.max(x, -1) + (1 - sel.maxfrac) * mean
    return mean


def _tree_probs(values: jax.Array, exists: jax.Array, branching: int = 16) -> jax.Array:
    """Leaf probabilities [P] of a draw down a `branching`-ary sum tree over leaves [P]
    (P a power of branching): at each node the infinite children if its total is
    infinite, else uniform over its children if the total is 0, else proportional."""
    levels = []  # (child values [G, b], child exists [G, b]) from the leaves up
    v, ex = values, exists
    while v.shape[0] > 1:
        v, ex = v.reshape(-1, branching), ex.reshape(-1, branching)
        levels.append((v, ex))
        v, ex = jnp.sum(jnp.where(ex, v, 0.0), -1), jnp.any(ex, -1)
    p = jnp.ones((1,), values.dtype)
    for v, ex in reversed(levels):
        v = jnp.where(ex, v, 0.0)
        total = jnp.sum(v, -1, keepdims=True)
        inf = jnp.isinf(v)
        q_inf = inf / jnp.maximum(jnp.sum(inf, -1, keepdims=True), 1)
        q_zero = ex / jnp.maximum(jnp.sum(ex, -1, keepdims=True), 1)
        q = jnp.where(jnp.isinf(total), q_inf,
                      jnp.where(total == 0, q_zero, v / jnp.where(total == 0, 1.0, total)))
        p = (p[:, None] * q).reshape(-1)
    return p


def _component_probs(state: ReplayState) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Each selector's probability of every item slot, [3, E, capacity] (uniform,
    priority, recency), and the items' start [E, capacity]."""
    sel, E, L, cap = state.selector, state.num_envs, state.length, state.capacity
    start, valid = _item_starts(state)
    c = _rows_written(state)
    inserted = E * jnp.maximum(c - L + 1, 0)  # N, items ever inserted
    t = start * E + jnp.arange(E, dtype=jnp.int32)[:, None]  # insertion order [E, cap]
    n = jnp.sum(valid)
    uniform = valid / jnp.maximum(n, 1)

    S = E * (cap - L + 1)
    pos = jnp.where(inserted <= S, t,
                    jnp.where(t == inserted - 1, S - 1, t % max(S - 1, 1)))
    depth = max(1, math.ceil(math.log(S) / math.log(16) - 1e-9))
    P = 16 ** depth
    pos = jnp.where(valid, pos, P)  # out of bounds: dropped
    weights = _item_weights(state, start)
    leaves = jnp.zeros((P,), jnp.float32).at[pos].set(weights, mode="drop")
    exists = jnp.zeros((P,), bool).at[pos].set(True, mode="drop")
    priority = jnp.where(valid, _tree_probs(leaves, exists)[jnp.minimum(pos, P - 1)], 0.0)

    size = S if not sel.size else max(1, round(sel.size * E / (sel.envs or E)))
    a = jnp.arange(size)
    w = 1.0 / (a + 1).astype(jnp.float32) ** jnp.float32(sel.recexp)
    w = w / jnp.sum(w)
    age_of = jnp.where(n < size,
                       jnp.floor(a.astype(jnp.float32) / size * n.astype(jnp.float32)),
                       a).astype(jnp.int32)
    by_age = jax.ops.segment_sum(w, age_of, num_segments=size)
    age = inserted - 1 - t
    recency = jnp.where(valid & (age < size), by_age[jnp.clip(age, 0, size - 1)], 0.0)
    return jnp.stack([uniform, priority, recency]).astype(jnp.float32), start


def replay_probs(state: ReplayState) -> jax.Array:
    """The selector mixture's probability of drawing each item, by start slot [E, cap]
    (0 where no item is held); the queue aside. Needs a state with a selector."""
    probs, _ = _component_probs(state)
    sel = state.selector
    fracs = jnp.asarray([sel.uniform, sel.priority, sel.recency], jnp.float32)
    return jnp.tensordot(fracs, probs, 1)


def writes_priorities(state: ReplayState, version: str) -> bool:
    """Whether the update's priorities replace the latent write-back: 29eb964 with a
    prioritized fraction (agent.py:204-221 @29eb964 returns only step ids and priorities
    then); e3f0224 writes no priorities back (agent.py:151-152 @e3f0224)."""
    sel = state.selector
    return sel is not None and sel.priority > 0 and str(version) == "29eb964"


def replay_set_priority(state: ReplayState, env: jax.Array, row: jax.Array,
                        value: jax.Array) -> ReplayState:
    """Priorities of rows: env [M], absolute row [M], value [M] (selectors.prioritize).
    Rows the ring no longer holds (or not yet written) are left alone; where a row
    repeats, the later entry wins."""
    held = (row >= state.count[env] - state.capacity) & (row < state.count[env])
    M = row.shape[0]
    later = (jnp.arange(M)[None, :] > jnp.arange(M)[:, None]) & (
        (env[:, None] == env[None, :]) & (row[:, None] == row[None, :]))
    write = held & ~jnp.any(later, -1)
    slots = jnp.where(write, row % state.capacity, state.capacity)
    return state.replace(prio=state.prio.at[env, slots].set(
        value.astype(jnp.float32), mode="drop"))


def replay_prioritize(state: ReplayState, index: ReplayIndex, priority: jax.Array
                      ) -> ReplayState:
    """The priority of the trained rows of each sampled window, priority [B, T] for rows
    start + K .. start + L - 1 (K = L - T), as the reference's replay.update passes the
    batch's step ids with the agent's priorities."""
    B, T = priority.shape
    rows = index.start[:, None] + (state.length - T) + jnp.arange(T)
    envs = jnp.broadcast_to(index.env[:, None], rows.shape)
    return replay_set_priority(state, envs.reshape(-1), rows.reshape(-1),
                               priority.reshape(-1))


def _zero_item(state: ReplayState, env: jax.Array, start: jax.Array, where: jax.Array
               ) -> ReplayState:
    """zero_on_sample: the drawn item's rows get priority 0 (only where `where`)."""
    slots = (start + jnp.arange(state.length)) % state.capacity
    slots = jnp.where(where, slots, state.capacity)
    return state.replace(prio=state.prio.at[env, slots].set(0.0, mode="drop"))


def _select(state: ReplayState, key: jax.Array, online: jax.Array
            ) -> tuple[ReplayState, jax.Array, jax.Array]:
    """Draws from the mixture for the batch elements not served by the queue: the state
    (priorities zeroed where zero_on_sample), env [B] and start [B]."""
    sel, cap = state.selector, state.capacity
    fracs = jnp.asarray([sel.uniform, sel.priority, sel.recency], jnp.float32)
    B = online.shape[0]

    def draw(state, k):
        probs, start = _component_probs(state)
        k_sel, k_item = jax.random.split(k)
        comp = jax.random.choice(k_sel, 3, p=fracs)
        flat = jax.random.choice(k_item, probs.shape[1] * cap, p=probs[comp].reshape(-1))
        env, slot = flat // cap, flat % cap
        return comp, env.astype(jnp.int32), start[env, slot]

    if not (sel.zero_on_sample and sel.priority > 0):
        comp, env, start = jax.vmap(lambda k: draw(state, k))(jax.random.split(key, B))
        return state, env, start

    def step(state, x):
        k, is_online = x
        comp, env, start = draw(state, k)
        state = _zero_item(state, env, start, (comp == 1) & ~is_online)
        return state, (env, start)

    state, (env, start) = jax.lax.scan(step, state, (jax.random.split(key, B), online))
    return state, env, start


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
    state = _mark_dirty(state, index.env, rows, held)
    if state.memory == "host":  # window after window: the later element's rows win
        new = {k: v.astype(state.data[k].dtype) for k, v in (("deter", deter),
                                                            ("stoch", stoch))}
        old = {k: state.data[k] for k in new}
        write = functools.partial(_write_windows, length=state.length)
        written = _host_op(write, writes=True)(old, index.env,
                                               index.start % state.capacity, new, held)
        return state.replace(data=dict(state.data, **written))
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


def _mark_dirty(state: ReplayState, env: jax.Array, rows: jax.Array, held: jax.Array
                ) -> ReplayState:
    """`dirty` set at the held rows [B, T] of env [B] (absolute row indices)."""
    if state.dirty is None:
        return state
    slots = jnp.where(held, rows % state.capacity, state.capacity)
    envs = jnp.broadcast_to(env[:, None], slots.shape)
    return state.replace(dirty=state.dirty.at[envs, slots].set(True, mode="drop"))


# ----------------------------------------------------------------------------- host memory
# The moves of a host replay's rows (module docstring). Each takes the `data` leaves
# ([E, capacity, ...] per seed, or [S, E, capacity, ...] with `seed` the seed of each
# item), and items with a leading axis [N]: windows to read or write, or rows to add.


def _host_op(fn, writes: bool = False):
    """fn(data, None, *items) for one seed's data, whose vmap over seeds is fn(data, seed,
    *items) over the seeds' items in turn (seed [S N] the seed of each): a host array is
    then sliced at an explicit seed index, never gathered (XLA moves slices of host
    memory, not gathers). writes: fn returns the new `data` (else items [N, ...])."""
    op = jax.custom_batching.custom_vmap(lambda data, *items: fn(data, None, *items))

    @op.def_vmap
    def _over_seeds(axis_size, in_batched, data, *items):
        if not all(jax.tree.leaves(in_batched[0])):
            raise NotImplementedError("host replay moves vmapped over seeds their rows lack")
        items = [jax.tree.map(
            lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *x.shape)), it, ib)
            for it, ib in zip(items, in_batched[1:], strict=True)]
        n = jax.tree.leaves(items)[0].shape[1]
        items = jax.tree.map(lambda x: x.reshape(axis_size * n, *x.shape[2:]), items)
        seed = jnp.repeat(jnp.arange(axis_size, dtype=jnp.int32), n)
        out = fn(data, seed, *items)
        if not writes:
            out = jax.tree.map(lambda x: x.reshape(axis_size, n, *x.shape[1:]), out)
        return out, jax.tree.map(lambda _: True, out)

    return op


def _to_device(x: jax.Array) -> jax.Array:
    return jax.device_put(x, jax.memory.Space.Device)


def _to_host(x: jax.Array) -> jax.Array:
    return jax.device_put(x, jax.memory.Space.Host)


def _each(n: int, body, carry):
    """body(i, carry) for i = 0 .. n - 1 in order (no loop for one item)."""
    if n == 1:
        return body(jnp.zeros((), jnp.int32), carry)
    return jax.lax.fori_loop(0, n, body, carry)


def _block_start(v: jax.Array, lead: tuple, env, row) -> tuple:
    zero = jnp.zeros((), jnp.int32)
    return (*lead, env, row) + (zero,) * (v.ndim - len(lead) - 2)


def _block_sizes(v: jax.Array, lead: tuple, rows: int) -> tuple:
    return (1,) * len(lead) + (1, rows) + v.shape[len(lead) + 2:]


def _read_block(v: jax.Array, lead: tuple, env, row, rows: int) -> jax.Array:
    """`rows` ring slots of one env from slot `row` (not wrapping), on the device:
    [rows, ...]."""
    block = jax.lax.dynamic_slice(v, _block_start(v, lead, env, row),
                                  _block_sizes(v, lead, rows))
    return _to_device(block).reshape(rows, *v.shape[len(lead) + 2:])


def _write_block(v: jax.Array, lead: tuple, env, row, block: jax.Array) -> jax.Array:
    """v with `block` [rows, ...] written at ring slots row .. row + rows - 1 of env."""
    rows = block.shape[0]
    block = block.reshape(_block_sizes(v, lead, rows))
    return jax.lax.dynamic_update_slice(v, _to_host(block), _block_start(v, lead, env, row))


def _window_blocks(slot, capacity: int, length: int):
    """The two blocks of `length` slots that hold a window starting at ring slot `slot`:
    its own (the ring's last `length` slots when it wraps) and the ring's first."""
    return jnp.minimum(slot, capacity - length), jnp.zeros((), jnp.int32)


def _read_windows(data: dict, seed, env, slot, *, length: int) -> dict:
    """Windows of `length` rows starting at ring slot slot [N] of env [N]: [N, length, ...]
    on the device."""
    leaves, tree = jax.tree.flatten(data)
    k = 0 if seed is None else 1
    cap = leaves[0].shape[k + 1]
    n = env.shape[0]
    offsets = jnp.arange(length)

    def body(i, outs):
        lead = () if seed is None else (seed[i],)
        first, zero = _window_blocks(slot[i], cap, length)
        pos = slot[i] + offsets  # ring slots of the window's rows, before wrapping
        wrapped = pos >= cap
        here = jnp.clip(pos - first, 0, length - 1)
        there = jnp.clip(pos - cap, 0, length - 1)
        new = []
        for v, out in zip(leaves, outs, strict=True):
            a = _read_block(v, lead, env[i], first, length)
            b = _read_block(v, lead, env[i], zero, length)
            mask = wrapped.reshape(length, *(1,) * (a.ndim - 1))
            new.append(jax.lax.dynamic_update_index_in_dim(
                out, jnp.where(mask, b[there], a[here]), i, 0))
        return new

    outs = [jnp.zeros((n, length, *v.shape[k + 2:]), v.dtype) for v in leaves]
    return jax.tree.unflatten(tree, _each(n, body, outs))


def _write_rows(data: dict, seed, rows: dict, slot) -> dict:
    """data with rows[k] [N, E, ...] written at ring slot slot [N] of every env."""
    leaves, tree = jax.tree.flatten(data)
    new_rows = jax.tree.leaves(rows)

    def body(i, leaves):
        lead = () if seed is None else (seed[i],)
        out = []
        for v, r in zip(leaves, new_rows, strict=True):
            row = r[i]  # [E, ...]: one slot of every env
            row = row.reshape(*(1,) * len(lead), row.shape[0], 1, *row.shape[1:])
            out.append(jax.lax.dynamic_update_slice(
                v, _to_host(row), _block_start(v, lead, jnp.zeros((), jnp.int32), slot[i])))
        return out

    return jax.tree.unflatten(tree, _each(slot.shape[0], body, leaves))


def _write_windows(data: dict, seed, env, slot, new: dict, held, *, length: int) -> dict:
    """data with new[k] [N, T, ...] written to the last T rows of each window (env [N],
    ring slot slot [N]) where held [N, T], window after window: both blocks that can hold
    a window's rows are read, merged on the device and written back in turn."""
    keys = sorted(data)
    cap = data[keys[0]].shape[(0 if seed is None else 1) + 1]
    T = held.shape[1]
    K = length - T

    def body(i, leaves):
        lead = () if seed is None else (seed[i],)
        out = list(leaves)
        for start in _window_blocks(slot[i], cap, length):
            at = jnp.remainder(start + jnp.arange(length) - slot[i], cap)  # window row
            t = jnp.clip(at - K, 0, T - 1)
            write = (at >= K) & (at < length) & held[i][t]
            for j, key in enumerate(keys):
                block = _read_block(out[j], lead, env[i], start, length)
                mask = write.reshape(length, *(1,) * (block.ndim - 1))
                block = jnp.where(mask, new[key][i][t], block)
                out[j] = _write_block(out[j], lead, env[i], start, block)
        return out

    return dict(zip(keys, _each(env.shape[0], body, [data[k] for k in keys]), strict=True))
