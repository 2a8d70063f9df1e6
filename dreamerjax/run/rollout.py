"""One evaluation episode of a trained policy with what a video needs of every step:
`dreamerjax eval RUN --video` draws it (viz/video.py).

Compiled suites roll out on device with the acting step of training and evaluation
(loop.act_and_step) and bring the per-step env states back; host suites play the episode
on an env built for rendering, with the host path's evaluation step (host_loop.eval_act),
and keep the env's own picture of each step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.envs.host import base as host_lib
from dreamerjax.run import host_loop, loop
from dreamerjax.run import setup as setup_lib
from dreamerjax.viz import video


def rollout(setup, params, key, mode: bool = False) -> dict:
    """One evaluation episode (up to the episode limit) with its per-step env states.

    Returns host arrays over steps [L + 1]: obs (the agent's dict), reward, done (the step
    ended the episode or came after its end), env_state (the collector's env states)."""
    if setup.host:
        return host_rollout(setup, params, key, mode)
    cfg = setup.config.agent

    @jax.jit
    def run(params, key):
        k_init, k_run = jax.random.split(key)
        env, row = jax.vmap(lambda k: envs_lib.collector_init(setup.spec, k))(
            k_init[None])
        carry = agent_lib.policy_initial(cfg, setup.spaces, 1)

        def step(c, k):
            env, row, carry, done = c
            k_pol, k_env = jax.random.split(k)
            _, carry, env2, row2, _ = loop.act_and_step(
                setup, params, carry, row, env, k_pol, k_env, mode)
            out = {"obs": row2["obs"], "reward": row2["reward"], "done": done,
                   "env_state": env2.env_state}
            return (env2, row2, carry, done | row2["is_last"]), out

        first = {"obs": row["obs"], "reward": row["reward"], "done": jnp.zeros((1,), bool),
                 "env_state": env.env_state}
        _, outs = jax.lax.scan(step, (env, row, carry, jnp.zeros((1,), bool)),
                               jax.random.split(k_run, setup.spec.episode_limit))
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], 0), first, outs)

    host = jax.tree.map(lambda x: np.asarray(x)[:, 0], run(params, key))
    return host


def render_env(config):
    """One host env of the run, built to render: Gymnasium envs with render_mode
    "rgb_array" where the env offers it; the other suites as training builds them."""
    suite, task = host_lib.split_env_id(config.run.env)
    if suite == "gym":
        import gymnasium

        from dreamerjax.envs.host.gym import GymEnv
        host_lib.require_extra(config.run.env)
        try:
            return GymEnv(task, env_id=config.run.env, render_mode="rgb_array")
        except (TypeError, ValueError, gymnasium.error.Error):
            pass  # an env without render_mode: its observations are drawn instead
    return setup_lib.env_factory(config)()


def host_rollout(setup, params, key, mode: bool = False) -> dict:
    """One evaluation episode of a host env (up to the episode limit), with a picture of
    every step. Returns host arrays over steps [L + 1] (the reset row first): frame (RGB
    uint8 [H, W, 3]), obs, reward, done (all False: the rollout stops at is_last)."""

    env = render_env(setup.config)
    col = host_lib.HostCollector(host_lib.HostVector([lambda: env]),
                                 time_limit=setup.run.episode_limit)
    try:
        step = jax.jit(lambda p, c, r, k: host_loop.eval_act(setup, p, c, r, k, mode))
        carry = agent_lib.policy_initial(setup.config.agent, setup.spaces, 1)
        key = np.asarray(key)
        row = col.reset([host_loop.env_seed(*key.ravel().tolist())])
        keys = jax.random.split(jax.random.split(key)[1], host_loop.episode_limit(setup))
        steps = [(row, video.picture(env, row))]
        for k in keys:
            act, carry = step(params, carry, row, k)
            row, _ = col.step(np.asarray(act))
            steps.append((row, video.picture(env, row)))
            if row["is_last"][0]:
                break
    finally:
        col.close()
    rows = [r for r, _ in steps]
    return {"frame": np.stack([f for _, f in steps]),
            "obs": {n: np.stack([r["obs"][n][0] for r in rows]) for n in rows[0]["obs"]},
            "reward": np.array([r["reward"][0] for r in rows], np.float32),
            "done": np.zeros((len(rows),), bool)}
