"""Your own JAX environment, compiled into the training program through the env registry.

    python examples/jax_env.py --out runs/corridor_jax
    python examples/jax_env.py --out runs/quick --small    # a seconds-long smoke run

A compiled suite is a module with `make(task, episode_limit, **options) -> EnvSpec`: pure
`reset(key)` and `step(key, state, action, length)` functions of one env, which the loop
vmaps over envs and seeds and scans inside the compiled chunk. Register the module under
an id prefix with `dreamerjax.envs.registry.register`; its env ids are then
`PREFIX_TASK` (here `corridor_walk`) wherever an env id is taken. Register before training
starts, in the process that trains (the command line's precompile child does not see
registrations made in a script; `dreamerjax.train` compiles in its own process).
"""

from __future__ import annotations

import argparse
import dataclasses

import jax.numpy as jnp

import dreamerjax
from dreamerjax.envs import registry
from dreamerjax.envs.core import EnvSpec, Step

GOAL = 10


def make(task: str, episode_limit: int = 0) -> EnvSpec:
    """The corridor of examples/host_env.py in JAX: walk right to GOAL, reward 1 there."""
    if task != "walk":
        raise ValueError(f"unknown corridor task {task!r}; the suite has: walk")
    limit = episode_limit or 100  # agent steps; a time limit is truncation, not termination

    def reset(key):
        del key  # every episode starts at 0
        return jnp.int32(0), {"vector": jnp.zeros(1, jnp.float32)}

    def step(key, x, action, length):
        del key  # deterministic
        x = jnp.maximum(0, x + jnp.where(action == 1, 1, -1)).astype(jnp.int32)
        done = x == GOAL
        return Step(env_state=x, obs={"vector": x[None].astype(jnp.float32)},
                    reward=done.astype(jnp.float32), terminated=done,
                    truncated=length >= limit, stats={})

    return EnvSpec(env_id=task, suite="corridor", task=task,
                   obs_space=(("vector", (1,), "float32"),), discrete=True, num_actions=2,
                   action_dims=0, action_low=(), action_high=(), episode_limit=limit,
                   reset=reset, step=step)


if "corridor" not in registry.SUITES:
    registry.register(registry.Suite(
        "corridor", __name__, requires=("jax",), about="a corridor in JAX (examples/)",
        example="corridor_walk"))

# The settings of the tests' small run (tests/_runs.py): the tiny network, 8 envs,
# batches of 4 x 16 rows; only checks that everything runs.
SMALL = dict(steps=160, num_envs=8, eval_every=80, eval_episodes=2, batch_size=4,
             batch_length=16, train_ratio=32, replay_capacity=64)


def main(out: str, small: bool = False) -> None:
    config = dreamerjax.make_config("corridor_walk", tiny=True, steps=1200, eval_every=400)
    if small:
        config = dataclasses.replace(config, run=dataclasses.replace(config.run, **SMALL))
    dreamerjax.train(config, seeds=(0, 1), out=out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/corridor_jax")
    parser.add_argument("--small", action="store_true", help="the tests' small run")
    args = parser.parse_args()
    main(args.out, args.small)
    print(f"records in {args.out}/records.jsonl; see them with: dreamerjax summary {args.out}")
