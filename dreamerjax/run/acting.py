"""The acting step and the episode: one of each for every caller.

    act        the policy on a batch of rows (agent.policy: encoder, posterior step, actor)
               -> the rows to store (the action taken, the posterior latent) and the carry.
               Training's tick (compiled and host), evaluation, videos and a deployed
               Policy all act through it.
    play       fresh episodes of a compiled env, the first of each: the evaluation of a log
               point, `dreamerjax eval`, `dreamerjax.evaluate` (all three through
               evaluate) and the video episode (run/rollout.py).
    play_host  the same for host envs, stepped on the CPU between calls of the acting
               program (host_loop.eval_program).

Every key an episode draws comes from run/streams.py: the episode's reset key and one key
per step (streams.episode_keys), split into the policy's and the env's (streams.step_keys).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.data import schema
from dreamerjax.run import streams

f32 = jnp.float32


def act(cfg, spaces, params, carry, row: dict, k_pol, mode: bool = False):
    """The policy on rows [n] ({obs, is_first, ...}) with key k_pol: (the rows as the
    replay stores them, with the action chosen and the posterior latent (envs.replay_row:
    the action zeroed on is_last rows); the new carry). cfg: the agent config; mode: act
    with the mode of the latent and action distributions instead of samples."""
    action, carry, latent = agent_lib.policy(params, cfg, spaces, carry, row["obs"],
                                             row["is_first"], k_pol, mode)
    stored = jax.vmap(envs_lib.replay_row)(row, action, latent["deter"], latent["stoch"])
    return stored, carry


def act_on_host_rows(setup, params, carry, row: dict, k_pol, mode: bool = False):
    """act on rows a host collector made [n]: first cast to the row schema's dtypes."""
    row = schema.conform(row, schema.env_row_spec(setup.spaces, row["is_first"].shape))
    return act(setup.config.agent, setup.spaces, params, carry, row, k_pol, mode)


def act_and_step(setup, params, carry, row, env, k_pol, k_env, mode: bool = False):
    """act, then every compiled env steps with the action taken. Returns (the rows to
    store; carry; env; next rows; episode ends [n])."""
    stored, carry = act(setup.config.agent, setup.spaces, params, carry, row, k_pol, mode)
    env_keys = jax.random.split(k_env, row["is_first"].shape[0])
    env, new_row, ends = jax.vmap(
        lambda st, a, k: envs_lib.collector_step(setup.spec, st, a, k))(
        env, stored["action"], env_keys)
    return stored, carry, env, new_row, ends


# ----------------------------------------------------------------------------- episodes


def evaluate(setup, params, key, episodes: int, mode: bool = False,
             stop_early: bool = True):
    """A compiled env's evaluation: `episodes` fresh envs, the first episode of each, up to
    the episode limit, with params (the policy's samples, or its mode), every key from
    `key` (streams.episode_keys: a reset key for each env, one key per tick). Returns
    (returns [episodes], lengths [episodes]). Vmapped over seeds, the while loop (play)
    runs until every seed's episodes are done; a seed done earlier keeps its results."""
    k_init, keys = streams.episode_keys(key, setup.spec.episode_limit)
    ret, length, _ = play(setup, params, jax.random.split(k_init, episodes), keys, mode,
                          stop_early)
    return ret, length


def play(setup, params, reset_keys, step_keys, mode: bool = False, stop_early: bool = True,
         record: bool = False):
    """Fresh compiled envs, one per reset key [E, 2], the first episode of each, tick t
    acting with step_keys[t] [limit, 2] (streams.step_keys: the policy's and the env's).
    An episode's return and length stop counting once it is done. Returns (returns [E],
    lengths [E], trace).

    Not recording: a while loop that stops on the tick where the last episode ends
    (stop_early) or plays every tick; the results are the same either way
    (tests/test_evaluate.py), trace is None. record: every tick played (a scan), trace
    holds the first episode's steps, {obs, reward, done (the episode had ended before the
    step), env_state} over steps [limit + 1, 1, ...], the reset row first (a video's: the
    others play beside it as in the evaluation, unrecorded)."""
    episodes, limit = reset_keys.shape[0], step_keys.shape[0]
    env, row = jax.vmap(lambda k: envs_lib.collector_init(setup.spec, k))(reset_keys)
    carry = agent_lib.policy_initial(setup.config.agent, setup.spaces, episodes)
    zeros = jnp.zeros((episodes,), f32)

    def tick(c, k):
        env, row, carry, ret, length, done = c
        k_pol, k_env = streams.step_keys(k)
        _, carry, env, row, _ = act_and_step(setup, params, carry, row, env, k_pol, k_env,
                                             mode)
        live = ~done
        out = _first({"obs": row["obs"], "reward": row["reward"], "done": done,
                      "env_state": env.env_state})
        ret = ret + jnp.where(live, row["reward"], 0.0)
        length = length + live.astype(f32)
        done = done | row["is_last"]
        return (env, row, carry, ret, length, done), out

    init = (env, row, carry, zeros, zeros, jnp.zeros((episodes,), bool))
    if record:
        (_, _, _, ret, length, _), outs = jax.lax.scan(tick, init, step_keys)
        first = _first({"obs": row["obs"], "reward": row["reward"], "done": init[-1],
                        "env_state": env.env_state})
        trace = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], 0), first, outs)
        return ret, length, trace

    def cond(c):
        t, done = c[0], c[1][-1]
        return (t < limit) & ~jnp.all(done) if stop_early else t < limit

    def step(c):
        t, inner = c
        return t + 1, tick(inner, step_keys[t])[0]

    _, (_, _, _, ret, length, _) = jax.lax.while_loop(
        cond, step, (jnp.zeros((), jnp.int32), init))
    return ret, length, None


def play_host(setup, collector, program, params, env_seeds, step_keys, on_rows=None):
    """Fresh episodes of host envs: the collector's S x E envs (seed-major) reset with
    env_seeds [S * E], the first episode of each, tick t acting with program
    (host_loop.eval_program)
    on params [S, ...] and step_keys [S, limit, 2]; stops on the tick where the last
    episode ends. on_rows(rows [S * E, ...]) sees the reset rows and every tick's. Returns
    (returns, lengths) [S * E] float32. An unfinished episode leaves its env mid-episode:
    the next play resets every env."""
    seeds, limit = step_keys.shape[0], step_keys.shape[1]
    flat = collector.reset(list(env_seeds))
    n = len(env_seeds)
    carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (seeds, *x.shape)),
                         agent_lib.policy_initial(setup.config.agent, setup.spaces,
                                                  n // seeds))
    ret, length = np.zeros((n,), np.float64), np.zeros((n,), np.int64)
    done = np.zeros((n,), bool)
    if on_rows is not None:
        on_rows(flat)
    for t in range(limit):
        action, carry = program(params, carry, _split_seeds(flat, seeds), step_keys[:, t])
        action = np.asarray(action)
        flat, _ = collector.step(action.reshape(n, *action.shape[2:]))
        if on_rows is not None:
            on_rows(flat)
        live = ~done
        ret += np.where(live, flat["reward"], 0.0)
        length += live
        done |= flat["is_last"]
        if done.all():
            break
    return ret.astype(np.float32), length.astype(np.float32)


def _first(tree):
    """[E, ...] -> [1, ...] on every leaf: the recorded episode's."""
    return jax.tree.map(lambda x: x[:1], tree)


def _split_seeds(tree, seeds: int):
    """[seeds * n, ...] -> [seeds, n, ...] on every leaf."""
    return jax.tree.map(lambda x: x.reshape(seeds, -1, *x.shape[1:]), tree)
