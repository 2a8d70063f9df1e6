"""What a resumed reference run needs beyond the stock checkpoint (embodied/run/train.py:94-97).

The stock checkpoint holds `step` (Counter.save), `agent` (JAXAgent.save: the parameters,
optimiser and normaliser state, dreamerv3/jaxagent.py:240-243) and `replay`
(Replay.save: its chunk files and the limiter, embodied/replay/replay.py:319-334). We keep
the first two as they are and add two entries of our own:

- `replay`: the replay's whole in-memory state instead of its chunk files, because
  Replay.load (replay.py:336-387) rebuilds only the items: the per-env streams of the last
  `length - 1` steps (replay.py:114-141), the online queue and the sampler's generator
  would restart, so no env would add an item for its next 64 rows.
- `harness`: the agent's state outside its parameters (update counter, seed generator,
  lagging policy parameters, pending sync and the one-update-late outputs and metrics,
  jaxagent.py:67-69, 75, 80, 186-202), the driver's pending actions and policy carry
  (driver.py:30-31, 67-74), each training env's port state and reset generator, the
  update scheduler's credit (when.py:26-42), the train carry, and the harness's own
  bookkeeping (episodes, file offsets, wall time).

Not restored (documented in README.md): the prefetched batches of the two dataset
threads (jaxagent.py:233-238, prefetch.py:32-41; new ones are drawn from the restored
replay, and the report thread's first draws take up to 32 online-queue items again, as
at a fresh start), and the logger-only episode aggregates (train.py:22-65).
"""

from __future__ import annotations

import pickle

import jax

# Replay attributes that make up its content (replay.py:35-50, 62-70); the limiter goes
# through its own save/load, last, because the dataset threads wait on it
# (replay.py:169-172) and must not sample a half-restored replay.
REPLAY_FIELDS = ("chunks", "refs", "items", "fifo", "itemid", "current", "streams",
                 "sampler", "metrics", "lengths", "queue")


class ReplaySnapshot:
    """A checkpoint entry (save/load) for the replay's in-memory state."""

    def __init__(self, replay) -> None:
        self.replay = replay

    def save(self) -> bytes:
        # Pickled under the write lock so no add can interleave; the dataset threads only
        # read, and at a record point they wait on their full queues (README.md).
        replay = self.replay
        with replay.rwlock.writing:
            state = {k: getattr(replay, k) for k in REPLAY_FIELDS if hasattr(replay, k)}
            state["limiter"] = replay.limiter.save()
            return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    def load(self, blob: bytes) -> None:
        state = pickle.loads(blob)
        limiter = state.pop("limiter")
        with self.replay.rwlock.writing:
            for key, value in state.items():
                setattr(self.replay, key, value)
        self.replay.limiter.load(limiter)


def _get(tree):
    return None if tree is None else jax.device_get(tree)


def agent_state(agent) -> dict:
    return {
        "updates": agent.updates.save(),
        "rng": agent.rng.bit_generator.state,
        "policy_params": _get(agent.policy_params),
        "pending_sync": _get(agent.pending_sync),
        "pending_outs": _get(agent.pending_outs),
        "pending_mets": _get(agent.pending_mets),
        "sync_prev": agent.should_sync._prev,
    }


def load_agent_state(agent, state: dict) -> None:
    """After agent.load(params), which resets policy_params to the current parameters
    (jaxagent.py:245-255): put back the lagging copy the training actor was using."""
    agent.updates.load(state["updates"])
    agent.rng.bit_generator.state = state["rng"]
    with agent.policy_lock:
        jax.tree.map(lambda x: x.delete(), agent.policy_params)
        agent.policy_params = jax.device_put(state["policy_params"], agent.policy_mirrored)
        sync = state["pending_sync"]
        agent.pending_sync = None if sync is None else jax.device_put(
            sync, agent.policy_mirrored)
    # numpy trees stand in for the fetched device arrays: _take_outs / _take_mets only
    # call __array__ on them (jaxagent.py:367-378).
    agent.pending_outs = state["pending_outs"]
    agent.pending_mets = state["pending_mets"]
    agent.should_sync._prev = state["sync_prev"]


def loop_state(loop) -> dict:
    """The driver's, the envs' and the scheduler's state of a ref_loop.TrainLoop."""
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
    loop.driver.carry = state["driver_carry"]  # numpy lists; JAXAgent.policy stacks them
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
