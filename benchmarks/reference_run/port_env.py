"""A gymnax port (gymnax_ports.py) as an `embodied.Env` of the reference (29eb964 or e3f0224).

Reset protocol of the reference's envs (embodied/envs/dummy.py:36-43): a `reset` action,
or any step after the episode's last one, returns a fresh state with reward 0 and
`is_first`; the step that ends the episode returns its final observation with `is_last`,
and `is_terminal` only when the task terminated (a time limit is not terminal).

Every call is one row; rows count from 0 per env, as docs/protocol.md section 1 counts
them. A training env appends one line per finished episode to a shared list; evaluation
envs pass `episodes=None`.
"""

from __future__ import annotations

import embodied
import numpy as np

# The reference's space class: embodied.Space at 29eb964, elements.Space at e3f0224
# (embodied/core/space.py @29eb964; embodied/core/base.py @e3f0224 imports elements).
if hasattr(embodied, "Space"):
    Space = embodied.Space
else:
    from elements import Space


class PortEnv(embodied.Env):
    """One env of a port class (e.g. gymnax_ports.Pendulum).

    seed: a numpy SeedSequence entropy (e.g. (run seed, stream, env index)) for this env's
    own reset generator. worker: the env's index, for the episode log.
    """

    def __init__(self, port_cls, seed, worker: int = 0, episodes: list | None = None,
                 run_seed: int = 0) -> None:
        self._port = port_cls()
        self._rng = np.random.default_rng(seed)
        self._worker = worker
        self._run_seed = run_seed
        self._episodes = episodes
        self._done = True  # the first call resets whatever its action
        self._row = 0
        self._score = 0.0
        self._length = 0

    @property
    def obs_space(self):
        port = self._port
        return {
            "vector": Space(np.float32, (port.obs_size,), -port.obs_high,
                                     port.obs_high),
            "reward": Space(np.float32),
            "is_first": Space(bool),
            "is_last": Space(bool),
            "is_terminal": Space(bool),
        }

    @property
    def act_space(self):
        port = self._port
        if port.discrete:  # an index, as the reference's discrete envs give it
            action = Space(np.int32, (), 0, port.num_actions)
        else:
            action = Space(np.float32, port.action_shape, port.action_low,
                                    port.action_high)
        return {"action": action, "reset": Space(bool)}

    def step(self, action):
        if action["reset"] or self._done:
            obs = self._port.reset(self._rng)
            self._done, self._score, self._length = False, 0.0, 0
            return self._out(obs, np.float32(0.0), is_first=True)
        obs, reward, terminated, truncated = self._port.step(action["action"])
        self._score += float(reward)
        self._length += 1
        self._done = bool(terminated or truncated)
        if self._done and self._episodes is not None:
            self._episodes.append({
                "seed": self._run_seed, "worker": self._worker, "row_last": self._row,
                "length": self._length, "score": self._score, "terminal": bool(terminated)})
        return self._out(obs, reward, is_last=self._done, is_terminal=bool(terminated))

    def _out(self, obs, reward, is_first=False, is_last=False, is_terminal=False):
        self._row += 1
        return {"vector": obs, "reward": np.float32(reward), "is_first": is_first,
                "is_last": is_last, "is_terminal": is_terminal}

    def save(self) -> dict:
        """Everything a resume needs: the port's state, the reset generator, the counters."""
        return {"port": self._port.get_state(), "rng": self._rng.bit_generator.state,
                "done": self._done, "row": self._row, "score": self._score,
                "length": self._length}

    def load(self, state: dict) -> None:
        self._port.set_state(**state["port"])
        self._rng.bit_generator.state = state["rng"]
        self._done, self._row = state["done"], state["row"]
        self._score, self._length = state["score"], state["length"]

    def close(self):
        pass
