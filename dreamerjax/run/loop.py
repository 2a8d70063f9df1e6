"""The per-seed training functions: pure, jittable, applied over seeds by over_seeds.

One tick = every env of a seed takes one step: the policy acts on the current rows, the
rows (with the action and the posterior latent) enter the replay, the updates that the
train-ratio schedule owes at this tick run, then the envs step to the next rows.
`run_chunk` scans the ticks of one log interval for a batch of seeds. The acting step and
the evaluation episodes are run/acting.py's. Nothing here does I/O; run/driver.py runs
these (through run/trainers.py).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo import fsdp as fsdp_lib
from dreamerjax.config.defaults import (
    data_devices,
    fsdp_devices,
)
from dreamerjax.data import metric_window, schema
from dreamerjax.data import replay as replay_lib
from dreamerjax.data import schedule as schedule_lib
from dreamerjax.run import acting, streams
from dreamerjax.run.setup import SeedState, Setup

# The mesh axis over which one seed's agent trains data-parallel (jax.train_devices): each
# device of it holds num_envs / N of the seed's envs and its replay rows, and samples
# batch_size / N of each batch from them.
DATA_AXIS = "data"


def updates_per_tick(setup: Setup) -> np.ndarray:
    """Updates owed after each tick of the whole run (exact reference schedule)."""
    run = setup.run
    sched = schedule_lib.schedule_from_config(run, setup.config.agent.reference)
    ticks = np.arange(run.steps // run.num_envs)
    # One jitted program, not the vmap's ops one by one: 18 MiB less RSS for the whole
    # run's 1,250 ticks (results/bench/LOG.md, "Peak RSS of a training process"); the same integers.
    owed = jax.jit(jax.vmap(lambda t: schedule_lib.updates_owed(sched, t)))
    return np.asarray(owed(ticks), np.int32)


# The update as a jitted function: inline=True puts its ops into the chunk as they are (the
# chunk's program text is unchanged: no call boundary).
_update = jax.jit(agent_lib.update, static_argnums=(1, 2, 5, 6), inline=True)


def fsdp_layout(setup: Setup) -> fsdp_lib.Fsdp | None:
    """The FSDP layout of a seed's agent state when jax.train_mesh's f > 1 (its
    parameters, slow critic and optimiser moments stored as slices over the f devices,
    algo/fsdp.py), else None."""
    f = fsdp_devices(setup.run)
    return fsdp_lib.Fsdp(f, DATA_AXIS) if f > 1 else None


def data_axis(setup: Setup) -> str | tuple[str, ...] | None:
    """The mesh axes a seed's envs and batch split over: DATA_AXIS when a seed trains on
    several devices, (DATA_AXIS, fsdp_lib.FSDP_AXIS) when they also hold its parameters
    as slices (the d x f devices as one data axis, data-major), else None (one device:
    the functions below are then the single-device ones, key for key)."""
    fsdp = fsdp_layout(setup)
    if fsdp is not None:
        return fsdp.batch_axes
    return DATA_AXIS if data_devices(setup.run) > 1 else None


def acting_params(setup: Setup, params: dict) -> dict:
    """The parameters the policy acts with (agent.policy_params: encoder, posterior step,
    actor), whole: under an FSDP layout gathered from this device's slices, only these
    (the decoder, the heads, the critic and the prior's layers stay in slices), else
    params' own."""
    cfg = setup.config.agent
    used = agent_lib.policy_params(cfg, params)
    fsdp = fsdp_layout(setup)
    if fsdp is None:
        return used
    dims = agent_lib.param_slices(cfg, setup.spaces, fsdp).dims
    return fsdp_lib.gather(used, agent_lib.policy_params(cfg, dims), fsdp)


def shard_key(key: jax.Array, axis: str | None) -> jax.Array:
    """This data shard's own key (its envs and its part of the batch draw their own
    numbers, as each of the reference's train devices gets its own seed,
    jaxagent.py:391-394 @29eb964); the key itself on one device."""
    return key if axis is None else jax.random.fold_in(key, jax.lax.axis_index(axis))


def shard_batch_size(setup: Setup) -> int:
    """Sequences of a batch that one data shard samples and trains on."""
    return setup.run.batch_size // data_devices(setup.run)


def reduce_metrics(mets: dict, axis: str | None) -> dict:
    """The update metrics of every data shard averaged: means over the whole batch (the
    shards are equal in size); integer counters are the same on every shard."""
    if axis is None:
        return mets
    return {k: jax.lax.pmean(v, axis) if jnp.issubdtype(v.dtype, jnp.floating) else v
            for k, v in mets.items()}


def metric_names(setup: Setup) -> tuple[str, ...]:
    """Metric names of one update (agent.metric_names: from the config, nothing traced)."""
    return agent_lib.metric_names(setup.config.agent, setup.spaces)


# ----------------------------------------------------------------------------- per seed


def init_seed(setup: Setup, key, names: tuple[str, ...] = ()) -> SeedState:
    """A fresh seed: agent from its own key chain, reset envs (none on the host path: its
    envs are host objects, trainers.HostTrainer), empty replay. Compiled and host paths
    split the key alike, so a seed's agent starts from the same parameters on both."""
    run, cfg = setup.run, setup.config.agent
    k_agent, k_env, k_run = jax.random.split(key, 3)
    agent_state = agent_lib.init(k_agent, cfg, setup.spaces)
    if setup.host:
        env, row = (), {}
    else:
        env, row = jax.vmap(lambda k: envs_lib.collector_init(setup.spec, k))(
            jax.random.split(k_env, run.num_envs))
    example = schema.zeros(schema.replay_row_spec(setup.spaces, cfg.rssm.deter,
                                                  cfg.rssm.stoch))
    replay = replay_lib.replay_init(run.num_envs, setup.capacity, example,
                                    setup.window_length, replay_lib.selector_from_run(run),
                                    run.replay_memory)
    carry = agent_lib.policy_initial(cfg, setup.spaces, run.num_envs)
    return SeedState(agent=agent_state, replay=replay, env=env, row=row, carry=carry,
                     key=k_run, window=metric_window.init(names),
                     bad_update=jnp.full((), -1, jnp.int32), updates=jnp.zeros((), jnp.int32))


def act_and_store(setup: Setup, s: SeedState):
    """Policy on the current rows, store them in the replay, step the envs
    (acting.act_and_step with the tick's keys, streams.tick_keys). Returns (state,
    episode ends [num_envs])."""
    key, k_pol, k_env = streams.tick_keys(s.key)
    axis = data_axis(setup)
    stored, carry, env, new_row, ends = acting.act_and_step(
        setup, acting_params(setup, s.agent.params), s.carry, s.row, s.env,
        shard_key(k_pol, axis), shard_key(k_env, axis))
    replay = replay_lib.replay_add(s.replay, stored)
    return s.replace(replay=replay, env=env, row=new_row, carry=carry, key=key), ends


def seed_loop(setup: Setup) -> str:
    """run.seed_loop resolved for the running backend: "vmap", "map" or "threads" ("auto" is
    "threads" on XLA:CPU, whose vmapped convolutions take its naive emitter and whose one
    program leaves a second core part idle, and "vmap" elsewhere)."""
    how = setup.run.seed_loop
    if how == "auto":
        return "threads" if jax.default_backend() == "cpu" else "vmap"
    return how


def with_run(setup: Setup, **changes) -> Setup:
    """The setup with run config fields replaced (fields that do not change its shapes)."""
    config = dataclasses.replace(setup.config, run=dataclasses.replace(setup.run, **changes))
    return dataclasses.replace(setup, config=config)


def seeds_map(setup: Setup, fn):
    """fn of one seed's state -> fn of every seed's (a leading seed axis), as run.seed_loop
    says: vmapped into one batched program, or one seed after another (lax.map) inside it.
    Each seed's numbers are its own either way; only the program's layout differs. Under
    "threads" a program that holds several seeds maps them (the trainer runs its chunk one
    seed per program)."""
    if seed_loop(setup) in ("map", "threads"):
        return functools.partial(jax.lax.map, fn)
    return jax.vmap(fn)


def over_seeds(setup: Setup, fn, *args):
    """fn applied to each seed's slice of args (leading seed axis), mapped as seeds_map
    maps a function of one argument."""
    return seeds_map(setup, lambda a: fn(*a))(args)


def train_once(setup: Setup, s: SeedState) -> SeedState:
    """Sample a batch (online queue first), update, write the latents back. Under
    data_axis each shard samples its part of the batch from its own envs' replay (a
    batch stratified by env shard) and writes its own latents back."""
    cfg, axis = setup.config.agent, data_axis(setup)
    key, k_sample, k_update = jax.random.split(s.key, 3)
    replay, batch, index = replay_lib.replay_sample(
        s.replay, shard_key(k_sample, axis), shard_batch_size(setup), setup.window_length)
    agent_state, outs, mets = _update(s.agent, cfg, setup.spaces, batch,
                                      shard_key(k_update, axis), axis, fsdp_layout(setup))
    mets = reduce_metrics(mets, axis)
    if replay_lib.writes_priorities(replay, cfg.version):  # 29eb964: instead of latents
        replay = replay_lib.replay_prioritize(replay, index, agent_lib.priority_signal(
            outs["losses"], setup.run.replay_priosignal, *outs["replay"]["deter"].shape[:2]))
    else:
        replay = replay_lib.replay_write_latents(
            replay, index, outs["replay"]["deter"], outs["replay"]["stoch"])
    ok = jnp.isfinite(mets["opt_loss"]) & jnp.isfinite(mets["opt_grad_norm"])
    bad = jnp.where((s.bad_update < 0) & ~ok, s.updates, s.bad_update)
    return s.replace(agent=agent_state, replay=replay, key=key,
                     window=metric_window.add(s.window, mets),
                     bad_update=bad, updates=s.updates + 1)


def run_chunk(setup: Setup, states: SeedState, updates_due: jax.Array):
    """Scan over the ticks of one log interval. states has a leading seed axis; updates_due
    [ticks] is the number of updates due after each tick (shared by all seeds, so the update
    loop below is an unbatched loop). Returns (states, episode ends [ticks, seeds, envs]).
    An offline run (run.offline) takes no env step: a tick is its updates alone, on the
    rows its replay was filled with (run/replay_io.py), and no episode ends."""

    act = seeds_map(setup, functools.partial(act_and_store, setup))
    train = seeds_map(setup, functools.partial(train_once, setup))

    def tick(states, n):
        if setup.run.offline:  # the ends of a tick where no episode ended
            ends = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype),
                                jax.eval_shape(act, states)[1])
        else:
            states, ends = act(states)
        states = jax.lax.fori_loop(0, n, lambda _, st: train(st), states)
        return states, ends

    return jax.lax.scan(tick, states, updates_due)
