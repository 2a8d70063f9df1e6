"""Your own JAX environment, compiled into the training program.

    python examples/jax_env.py --out runs/corridor_jax
    python examples/jax_env.py --out runs/quick --small    # a seconds-long smoke run

An env written in JAX follows `dreamerjax.JaxEnv`: `obs_space`, `num_actions`,
`episode_limit`, and pure `reset(key) -> (state, obs)` and
`step(key, state, action) -> (state, obs, reward, terminated)` functions of one env, which
the loop vmaps over envs and seeds and scans inside the compiled chunk.
`dreamerjax.register_env("corridor_walk", Corridor())` makes `corridor_walk` an env id
wherever one is taken (registering it again replaces it). Registrations live in the
process that makes them: `dreamerjax eval RUN --import MODULE` imports a module that
registers them into a fresh command-line process.
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp

import dreamerjax

GOAL = 10


class Corridor:
    """The corridor of examples/host_env.py in JAX: walk right to GOAL, reward 1 there."""

    obs_space = {"vector": ((1,), "float32")}
    num_actions = 2  # 0: left, 1: right
    episode_limit = 100  # agent steps; a time limit is truncation, not termination

    def reset(self, key):
        del key  # every episode starts at 0
        return jnp.int32(0), {"vector": jnp.zeros(1, jnp.float32)}

    def step(self, key, x, action):
        del key  # deterministic
        x = jnp.maximum(0, x + jnp.where(action == 1, 1, -1)).astype(jnp.int32)
        done = x == GOAL
        return x, {"vector": x[None].astype(jnp.float32)}, done.astype(jnp.float32), done


ENV_ID = dreamerjax.register_env("corridor_walk", Corridor())  # -> "corridor_walk"

# The settings of the tests' small run (tests/_runs.py): the tiny network, 8 envs,
# batches of 4 x 16 rows; only checks that everything runs.
SMALL = dict(steps=160, num_envs=8, eval_every=80, eval_episodes=2, batch_size=4,
             batch_length=16, train_ratio=32, replay_capacity=64)


def main(out: str, small: bool = False) -> None:
    settings = SMALL if small else dict(steps=1200, eval_every=400)
    config = dreamerjax.make_config(ENV_ID, tiny=True, **settings)
    dreamerjax.train(config, seeds=(0, 1), out=out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/corridor_jax")
    parser.add_argument("--small", action="store_true", help="the tests' small run")
    args = parser.parse_args()
    main(args.out, args.small)
    print(f"records in {args.out}/records.jsonl; see them with: dreamerjax summary {args.out}")
