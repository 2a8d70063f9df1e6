"""One evaluation episode of a trained policy with what a video needs of every step:
`dreamerjax eval RUN --video` draws it (viz/video.py).

The episode is played as evaluation plays its episodes (run/acting.py, the keys of
streams.episode_keys): compiled suites on device (acting.play, recording each step's env
state), host suites on an env built for rendering (acting.play_host, keeping the env's own
picture of each step).
"""

from __future__ import annotations

import jax
import numpy as np

from dreamerjax.envs.host import base as host_lib
from dreamerjax.run import acting, host_loop, streams
from dreamerjax.run import setup as setup_lib
from dreamerjax.viz import video


def rollout(setup, params, key, mode: bool = False) -> dict:
    """One evaluation episode (up to the episode limit) of one seed's params, from `key`.

    Compiled suites: host arrays over steps [L + 1] (the reset row first): obs (the
    agent's dict), reward, done (the step came after the episode's end), env_state (the
    collector's env states). Host suites: the steps up to the episode's end: frame (RGB
    uint8 [H, W, 3]), obs, reward, done (all False)."""
    if setup.host:
        return _host_rollout(setup, params, key, mode)
    k_init, keys = streams.episode_keys(key, setup.spec.episode_limit)

    @jax.jit
    def run(params, k_init, keys):
        return acting.play(setup, params, k_init[None], keys, mode, record=True)[2]

    return jax.tree.map(lambda x: np.asarray(x)[:, 0], run(params, k_init, keys))


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


def _host_rollout(setup, params, key, mode: bool) -> dict:
    """rollout of a host env: one env built to render, reset with a seed from the key's
    integers, played by acting.play_host as one seed with one episode."""
    env = render_env(setup.config)
    col = host_lib.HostCollector(host_lib.HostVector([lambda: env]),
                                 time_limit=setup.run.episode_limit)
    steps = []
    try:
        key = np.asarray(key)
        _, keys = streams.episode_keys(key, host_loop.episode_limit(setup))
        acting.play_host(setup, col, host_loop.eval_program(setup, mode),
                         jax.tree.map(lambda x: x[None], params),
                         [host_loop.env_seed(*key.ravel().tolist())], keys[None],
                         on_rows=lambda row: steps.append((row, video.picture(env, row))))
    finally:
        col.close()
    return host_episode(steps)


def host_episode(steps: list) -> dict:
    """A host episode for a video from its steps [(rows [1, ...], RGB picture)], the reset
    row first: {frame, obs, reward, done (all False)} over steps."""
    rows = [r for r, _ in steps]
    return {"frame": np.stack([f for _, f in steps]),
            "obs": {n: np.stack([r["obs"][n][0] for r in rows]) for n in rows[0]["obs"]},
            "reward": np.array([r["reward"][0] for r in rows], np.float32),
            "done": np.zeros((len(rows),), bool)}
