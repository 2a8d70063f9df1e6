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
import jax.numpy as jnp
import numpy as np

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.data import metric_window, schema
from dreamerjax.data import replay as replay_lib
from dreamerjax.run import loop
from dreamerjax.run.setup import SeedState, Setup

# ----------------------------------------------------------------------------- setup


def episode_limit(setup: Setup) -> int:
    return int(setup.run.episode_limit or setup.spec.episode_limit)


# ----------------------------------------------------------------------------- per seed


def init_host_seed(setup: Setup, key, names: tuple[str, ...] = ()) -> SeedState:
    """loop.init_seed without env state: the agent, an empty replay, the policy carry.
    The key is split as init_seed splits it, so a seed's agent starts from the same
    parameters on both paths."""
    run, cfg = setup.run, setup.config.agent
    k_agent, _, k_run = jax.random.split(key, 3)
    agent_state = agent_lib.init(k_agent, cfg, setup.spaces)
    example = schema.zeros(schema.replay_row_spec(setup.spaces, cfg.rssm.deter,
                                                  cfg.rssm.stoch))
    replay = replay_lib.replay_init(run.num_envs, setup.capacity, example,
                                    setup.window_length, replay_lib.selector_from_run(run),
                                    run.replay_memory)
    carry = agent_lib.policy_initial(cfg, setup.spaces, run.num_envs)
    return SeedState(agent=agent_state, replay=replay, env=(), row={}, carry=carry,
                     key=k_run, window=metric_window.init(names),
                     bad_update=jnp.full((), -1, jnp.int32), updates=jnp.zeros((), jnp.int32))


def act_and_insert(setup: Setup, s: SeedState, row: dict):
    """The policy on one seed's host rows [num_envs, ...] and their replay insert (the
    compiled act_and_store without its env step). Returns (state, actions [num_envs]).
    Under a data axis: one data shard's envs, as in act_and_store."""
    key, k_pol, _ = jax.random.split(s.key, 3)  # as act_and_store (its k_env unused here)
    row = schema.conform(row, schema.env_row_spec(setup.spaces, row["is_first"].shape))
    act, carry, latent = agent_lib.policy(
        loop.acting_params(setup, s.agent.params), setup.config.agent, setup.spaces,
        s.carry, row["obs"], row["is_first"],
        loop.shard_key(k_pol, loop.data_axis(setup)))
    stored = jax.vmap(envs_lib.replay_row)(row, act, latent["deter"], latent["stoch"])
    replay = replay_lib.replay_add(s.replay, stored)
    return s.replace(replay=replay, carry=carry, key=key), stored["action"]


def train_steps(setup: Setup, states: SeedState, n) -> SeedState:
    """`n` (traced) updates of every seed, as the compiled tick runs them."""
    return jax.lax.fori_loop(
        0, n, lambda _, st: loop.over_seeds(
            setup, lambda s: loop.train_once(setup, s), st), states)


def eval_act(setup: Setup, params, carry, row, key, mode: bool):
    """One evaluation policy step on host rows of one seed; returns (actions, carry)."""
    k_pol, _ = jax.random.split(key)
    row = schema.conform(row, schema.env_row_spec(setup.spaces, row["is_first"].shape))
    act, carry, _ = agent_lib.policy(params, setup.config.agent, setup.spaces, carry,
                                     row["obs"], row["is_first"], k_pol, mode)
    return act, carry




def env_seed(*parts: int) -> int:
    """The seed of one host env's reset from integers (run seed, env index, ...)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])
