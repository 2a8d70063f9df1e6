"""How often does a random policy end a gymnax episode before its time limit?

For a sparse-reward task (Acrobot-v1 pays -1 per step until the goal ends the episode) a
run learns nothing until some episode ends at the goal. This plays N episodes of a gymnax
env with actions drawn i.i.d. from fixed probabilities (uniform by default) and prints one
JSON object: the fraction of episodes that end before the limit, their length quantiles,
and the chance that K episodes in a row all run to the limit ((1 - p) ** K).

    .venv/bin/python benchmarks/experiments/random_episodes.py --env Acrobot-v1 --episodes 4000
    .venv/bin/python benchmarks/experiments/random_episodes.py --env Acrobot-v1 --probs 0.1 0.8 0.1
"""

from __future__ import annotations

import argparse
import json

import gymnax
import jax
import jax.numpy as jnp
import numpy as np


def terminal_steps(env_id: str, episodes: int, probs: np.ndarray, seed: int):
    """Step (1-based) at which each episode terminates, 0 when it reaches the limit: (N,)."""
    env, params = gymnax.make(env_id)
    limit = int(params.max_steps_in_episode)
    logits = jnp.log(jnp.asarray(probs, jnp.float32))

    def episode(key):
        key, reset_key = jax.random.split(key)
        obs, state = env.reset(reset_key, params)

        def step(carry, t):
            state, key, first = carry
            key, act_key, step_key = jax.random.split(key, 3)
            action = jax.random.categorical(act_key, logits)
            _, state, _, terminated, truncated, _ = env.step(step_key, state, action, params)
            # -1 marks a truncation, so the auto-reset episode after it is not counted.
            new = jnp.where(terminated, t + 1, jnp.where(truncated, -1, 0))
            first = jnp.where(first != 0, first, new)
            return (state, key, first), None

        (_, _, first), _ = jax.lax.scan(step, (state, key, jnp.int32(0)), jnp.arange(limit))
        return first

    keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
    first = np.asarray(jax.jit(jax.vmap(episode))(keys))
    return np.maximum(first, 0), limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Acrobot-v1", help="a gymnax id with discrete actions")
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--probs", type=float, nargs="*", help="action probabilities (uniform)")
    parser.add_argument(
        "--runs-of",
        type=int,
        nargs="*",
        default=[10, 36, 58],
        help="K for the chance that K episodes in a row all reach the limit",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    env, params = gymnax.make(args.env)
    n = int(env.action_space(params).n)
    probs = np.full(n, 1.0 / n) if not args.probs else np.asarray(args.probs, np.float64)
    if probs.shape != (n,) or not np.isclose(probs.sum(), 1.0) or (probs <= 0).any():
        raise SystemExit(f"--probs: {n} positive probabilities summing to 1 for {args.env}")
    first, limit = terminal_steps(args.env, args.episodes, probs, args.seed)
    ended = first > 0
    p = float(ended.mean())
    out = {
        "env": args.env,
        "episodes": args.episodes,
        "probs": probs.round(6).tolist(),
        "limit": limit,
        "seed": args.seed,
        "ended_before_limit": p,
        "ended_lengths_q10_50_90": (
            np.quantile(first[ended], [0.1, 0.5, 0.9]).tolist() if ended.any() else None
        ),
        "mean_length": float(np.where(ended, first, limit).mean()),
        "all_reach_limit": {str(k): (1.0 - p) ** k for k in args.runs_of},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
