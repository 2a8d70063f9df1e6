"""The host path's per-seed functions: environments that are not written in JAX
(Gymnasium, Atari, DMC, Crafter; dreamerjax/envs/host/) step on the CPU, while the policy,
the replay insert and the updates stay compiled. trainers.HostTrainer drives them:

      per tick:  jit(vmap(act_and_insert))(states, rows)   policy on the rows + replay add
                 actions -> host                            (waits for the policy only)
                 jit(train_steps)(states, owed)             the updates the schedule owes,
                                                            dispatched, not awaited
                 collector.step(actions)                    the envs step meanwhile

Each function is loop.py's compiled counterpart without the env step, so a seed computes
the same agent numbers on both paths from the same key.
"""

from __future__ import annotations

import jax
import numpy as np

from dreamerjax.data import replay as replay_lib
from dreamerjax.run import acting, loop, streams
from dreamerjax.run.setup import SeedState, Setup

# ----------------------------------------------------------------------------- setup


def episode_limit(setup: Setup) -> int:
    return int(setup.run.episode_limit or setup.spec.episode_limit)


# ----------------------------------------------------------------------------- per seed


def act_and_insert(setup: Setup, s: SeedState, row: dict):
    """The policy on one seed's host rows [num_envs, ...] and their replay insert (the
    compiled act_and_store without its env step, the tick's keys alike: its env key
    unused here). Returns (state, actions [num_envs]). Under a data axis: one data shard's
    envs, as in act_and_store."""
    key, k_pol, _ = streams.tick_keys(s.key)
    stored, carry = acting.act_on_host_rows(
        setup, loop.acting_params(setup, s.agent.params), s.carry, row,
        loop.shard_key(k_pol, loop.data_axis(setup)))
    replay = replay_lib.replay_add(s.replay, stored)
    return s.replace(replay=replay, carry=carry, key=key), stored["action"]


def train_steps(setup: Setup, states: SeedState, n) -> SeedState:
    """`n` (traced) updates of every seed, as the compiled tick runs them."""
    return jax.lax.fori_loop(
        0, n, lambda _, st: loop.over_seeds(
            setup, lambda s: loop.train_once(setup, s), st), states)


def eval_program(setup: Setup, mode: bool = False):
    """The acting program of host episodes (acting.play_host): (params, carry, rows, step
    keys) with a leading seed axis -> (actions, carry): each seed's policy on its own rows
    with its step key's policy key (streams.step_keys), seeds as run.seed_loop says."""
    def one(params, carry, row, key):
        k_pol, _ = streams.step_keys(key)
        stored, carry = acting.act_on_host_rows(setup, params, carry, row, k_pol, mode)
        return stored["action"], carry

    return jax.jit(lambda p, c, r, k: loop.over_seeds(setup, one, p, c, r, k))


def eval_inputs(setup: Setup, seeds, stream: str, index: int) -> tuple:
    """What a host evaluation's episodes draw (acting.play_host): (step keys [seeds, limit,
    2] from each seed's key of `stream` at `index`, as the compiled evaluation spends them
    (streams.episode_keys); the reset seeds of the seeds x run.eval_episodes envs, seed-major,
    from the same integers)."""
    keys = streams.keys(seeds, stream, index)
    limit = episode_limit(setup)
    step_keys = jax.vmap(lambda k: streams.episode_keys(k, limit)[1])(keys)
    env_seeds = [env_seed(s, streams.data(stream, index), e)
                 for s in seeds for e in range(setup.run.eval_episodes)]
    return step_keys, env_seeds


def env_seed(*parts: int) -> int:
    """The seed of one host env's reset from integers (run seed, env index, ...)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])
