"""What a resumed reference run at e3f0224 needs beyond the stock checkpoint
(embodied/run/train.py:83-90 @e3f0224).

The stock checkpoint (elements.Checkpoint) holds `step` (Counter), `agent`
(embodied/jax/agent.py:339-397 @e3f0224: the parameters, with the optimiser and
normaliser state among them, and the update, batch and action counters) and `replay`
(Replay.save: its chunk files, embodied/core/replay.py:253-268 @e3f0224). The first two
are kept as they are; two entries of ours are added:

- `replay`: the replay's whole in-memory state instead of its chunk files, because
  Replay.load rebuilds only the items: the per-env streams of the last `length - 1` steps,
  the online queue and the sampler's generator would restart.
- `harness`: the agent's state outside its checkpoint (the lagging policy parameters,
  the pending parameter sync, the one-update-late outputs and metrics and the batch
  counter, embodied/jax/agent.py:196-207, 264-285 @e3f0224), the driver's pending actions
  and policy carry, each training env's port state and reset generator, the update
  scheduler's credit (elements.when.Ratio), the train carry, and the harness's own
  bookkeeping (episodes, file offsets, wall time).

The harness entry is registered before the replay: restoring the replay wakes the two
prefetch threads (blocked on the empty replay since construction), and they must draw
their batch counters after the counter is put back.

Not restored: the batch each prefetch thread holds (embodied/core/streams.py:32-86
@e3f0224; new ones are drawn from the restored replay, with fresh batch counters), and the
logger-only episode aggregates (train.py:20, 30-55).
"""

from __future__ import annotations

import pickle

import jax

# Replay attributes that make up its content (replay.py:16-52 @e3f0224); the sampler
# (selectors.Uniform: a lock, so not picklable) goes by its fields, and last, because the
# prefetch threads wait on its length (replay.py:113-114) and must not sample a
# half-restored replay.
REPLAY_FIELDS = ("chunks", "refs", "items", "fifo", "itemid", "current", "streams",
                 "metrics", "lengths", "queue")
SAMPLER_FIELDS = ("indices", "keys")


class ReplaySnapshot:
    """A checkpoint entry (save/load) for the replay's in-memory state."""

    def __init__(self, replay) -> None:
        self.replay = replay

    def save(self) -> bytes:
        # Taken under the write lock (adds take the read side, replay.py:74) and the
        # sampler's lock; at a record point the prefetch threads wait on their full queues.
        replay, sampler = self.replay, self.replay.sampler
        with replay.rwlock.writing, sampler.lock:
            state = {k: getattr(replay, k) for k in REPLAY_FIELDS if hasattr(replay, k)}
            state["sampler"] = {k: getattr(sampler, k) for k in SAMPLER_FIELDS}
            state["sampler"]["rng"] = sampler.rng.bit_generator.state
            return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    def load(self, blob: bytes) -> None:
        state = pickle.loads(blob)
        sampled = state.pop("sampler")
        replay = self.replay
        with replay.rwlock.writing:
            for key, value in state.items():
                setattr(replay, key, value)
        with replay.sampler.lock:
            replay.sampler.rng.bit_generator.state = sampled["rng"]
            replay.sampler.indices = sampled["indices"]
            replay.sampler.keys = sampled["keys"]


def _get(tree):
    return None if tree is None else jax.device_get(tree)


def agent_state(agent) -> dict:
    return {
        "batches": int(agent.n_batches),
        "policy_params": _get(agent.policy_params),
        "pending_sync": _get(agent.pending_sync),
        "pending_outs": _get(agent.pending_outs),
        "pending_mets": _get(agent.pending_mets),
    }


def load_agent_state(agent, state: dict) -> None:
    """After agent.load(data), which sets the policy parameters to the current ones and
    the batch counter to the update counter (agent.py:355-397 @e3f0224): put back the
    lagging copy the training actor was using, and the batch counter, so no batch seed
    is drawn twice."""
    with agent.n_batches.lock:
        agent.n_batches.value = state["batches"]
    with agent.policy_lock:
        jax.tree.map(lambda x: x.delete(), agent.policy_params)
        agent.policy_params = jax.device_put(state["policy_params"],
                                             agent.policy_params_sharding)
        sync = state["pending_sync"]
        agent.pending_sync = None if sync is None else jax.device_put(
            sync, agent.policy_params_sharding)
    # numpy trees stand in for the fetched device arrays: _take_outs only calls
    # __array__ on them (agent.py:399-403 @e3f0224).
    agent.pending_outs = state["pending_outs"]
    agent.pending_mets = state["pending_mets"]


def loop_state(loop) -> dict:
    """The driver's, the envs' and the scheduler's state of a ref_loop_head.TrainLoop."""
    return {
        "driver_acts": loop.driver.acts,
        "driver_carry": _get(loop.driver.carry),
        "envs": [port.save() for port in loop.ports],
        "train_prev": loop.should_train._prev,
        "train_carry": _get(loop.carry[0]),
    }


def load_loop_state(loop, state: dict) -> None:
    agent = loop.agent
    loop.driver.acts = state["driver_acts"]
    # The driver's carry is the per-env list of local arrays that agent.policy stacks
    # (agent.py:185, 212 @e3f0224); put explicitly (the reference disallows implicit
    # transfers, embodied/jax/internal.py:37-38 @e3f0224).
    loop.driver.carry = jax.device_put(state["driver_carry"])
    for port, saved in zip(loop.ports, state["envs"], strict=True):
        port.load(saved)
    loop.should_train._prev = state["train_prev"]
    loop.carry[0] = jax.device_put(state["train_carry"], agent.train_sharded)


class HarnessEntry:
    """A checkpoint entry for everything else: agent internals, loop state, and the
    harness's own dict (`extra()` to save, `restore(dict)` on load)."""

    def __init__(self, loop, extra, restore) -> None:
        self.loop, self.extra, self.restore = loop, extra, restore

    def save(self) -> dict:
        return {"agent": agent_state(self.loop.agent), "loop": loop_state(self.loop),
                "harness": self.extra()}

    def load(self, state: dict) -> None:
        load_agent_state(self.loop.agent, state["agent"])
        load_loop_state(self.loop, state["loop"])
        self.restore(state["harness"])
