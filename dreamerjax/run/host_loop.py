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

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.defaults import Config
from dreamerjax.data import metric_window, schema
from dreamerjax.data import replay as replay_lib
from dreamerjax.envs.host import base as host_lib
from dreamerjax.run import loop as train_lib
from dreamerjax.run.loop import SeedState, Setup

# ----------------------------------------------------------------------------- setup


def env_settings(config: Config) -> dict[str, Any]:
    """The suite settings of the run's env from the Config's env section."""
    suite, _ = host_lib.split_env_id(config.run.env)
    return host_lib.suite_settings(
        suite, envs_lib.suite_options(getattr(config, "env", None), config.run.env))


def env_factory(config: Config) -> host_lib.EnvFactory:
    return host_lib.EnvFactory(config.run.env, tuple(sorted(env_settings(config).items())))


def spaces_of(spec: host_lib.HostSpec, config: Config) -> agent_lib.Spaces:
    acfg = config.agent
    return agent_lib.Spaces(
        spec.obs_space, spec.discrete, spec.num_actions if spec.discrete else spec.action_dims,
        enc_spaces=acfg.enc_spaces, dec_spaces=acfg.dec_spaces)


def make_host_setup(config: Config) -> Setup:
    """Build one env in this process to read its spaces (as the reference's make_agent
    does, dreamerv3/main.py:136-144) and validate the run before anything compiles."""
    run = config.run
    env = env_factory(config)()
    try:
        spec = env.spec
    finally:
        env.close()
    spaces = spaces_of(spec, config)
    if not (run.episode_limit or spec.episode_limit):
        raise ValueError(f"--env {run.env} has no episode limit of its own: set "
                         "run.episode_limit (evaluation plays each episode to its end)")
    capacity = train_lib.check_run(config, spaces)
    return Setup(config, spec, spaces, capacity, run.eval_every // run.num_envs)


def is_host_setup(setup: Setup) -> bool:
    return isinstance(setup.spec, host_lib.HostSpec)


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
                                    setup.window_length, replay_lib.selector_from_run(run))
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
        train_lib.acting_params(setup, s.agent.params), setup.config.agent, setup.spaces,
        s.carry, row["obs"], row["is_first"],
        train_lib.shard_key(k_pol, train_lib.data_axis(setup)))
    stored = jax.vmap(envs_lib.replay_row)(row, act, latent["deter"], latent["stoch"])
    replay = replay_lib.replay_add(s.replay, stored)
    return s.replace(replay=replay, carry=carry, key=key), stored["action"]


def train_steps(setup: Setup, states: SeedState, n) -> SeedState:
    """`n` (traced) updates of every seed, as the compiled tick runs them."""
    return jax.lax.fori_loop(
        0, n, lambda _, st: train_lib.over_seeds(
            setup, lambda s: train_lib.train_once(setup, s), st), states)


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
