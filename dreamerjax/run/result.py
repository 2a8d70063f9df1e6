"""What train() returns: TrainResult, the records of the call, each seed's final parameters
and a policy that acts with them in this process."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from dreamerjax.algo import spaces as spaces_lib
from dreamerjax.config.defaults import Config
from dreamerjax.run.processes import to_host


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What train() returns: brax's (make_policy, params, metrics) as one object.

    records: the records.jsonl lines this call wrote, one dict per seed per log point.
    params: each trained seed's agent parameters at the end of the call, {seed: nested
        dict of numpy arrays} (the paths of docs/architecture.md, "Parameters and names";
        no seed axis); at the last log point these are the ones its checkpoint holds.
    config, seeds, out: the run's.
    spaces: the agent's observation and action spaces (algo/spaces.Spaces).

    `policy(obs, seed=...)` acts in this process; `make_policy(seed)` is the Policy
    (run/policy.py) that `load_policy(out, seed)` would read from the checkpoint.
    """

    records: list[dict]
    params: Mapping[int, dict]
    config: Config
    seeds: tuple[int, ...]
    out: str
    spaces: spaces_lib.Spaces = dataclasses.field(repr=False)
    # How the env takes actions (run/policy.EnvActions): the policy's actions are the env's.
    env_actions: Any = dataclasses.field(default=None, repr=False)
    # One Policy per seed, made on first use: each holds its own jitted acting step.
    _policies: dict = dataclasses.field(default_factory=dict, init=False, repr=False,
                                        compare=False)

    def make_policy(self, seed: int | None = None):
        """The Policy of seed `seed` (default: the first trained), from the parameters in
        memory; the same object load_policy builds from a checkpoint."""
        from dreamerjax.run.policy import Policy, PolicyError

        seed = self.seeds[0] if seed is None else int(seed)
        if seed not in self.params:
            raise PolicyError(f"seed {seed} was not trained (seeds {list(self.seeds)})")
        if seed not in self._policies:
            self._policies[seed] = Policy(self.config, self.spaces, self.params[seed], seed,
                                          source=f"train(out={self.out!r}) in memory",
                                          env_actions=self.env_actions)
        return self._policies[seed]

    def policy(self, obs: Any, seed: int | None = None, state: Mapping | None = None,
               key: jax.Array | None = None, mode: str = "sample",
               raw: bool = False) -> tuple[Any, dict]:
        """One acting step of seed `seed`'s policy for a batch: obs {key: [B, *shape]} (as
        Policy.act takes it, `is_first` [B] optional). Returns (action, state): the env's
        action as Policy.act gives it (continuous: clipped and rescaled to the env's
        bounds; raw=True: the agent's own); state None starts B fresh episodes
        (Policy.init: the key of the seed), a returned state continues them."""
        policy = self.make_policy(seed)
        if state is None:
            state = policy.init(_batch_size(obs))
        return policy.act(obs, state, key=key, mode=mode, raw=raw)


def _batch_size(obs: Any) -> int:
    """B of a batch of observations (a dict of [B, ...] arrays, or one such array)."""
    first = next(iter(obs.values())) if isinstance(obs, Mapping) else obs
    return int(np.shape(first)[0])


def params_by_seed(params, seeds: tuple[int, ...]) -> dict[int, dict]:
    """Stacked agent params [seeds, ...] (possibly sharded, on device) -> {seed: host
    params}. Every process calls it (to_host gathers across processes)."""
    host = to_host(params)
    return {seed: jax.tree.map(lambda x, i=i: x[i], host) for i, seed in enumerate(seeds)}

