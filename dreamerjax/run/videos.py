"""Videos at log points (`--video-every N`, run.video_every_logs): at every N-th log point
the first episode of each seed's evaluation, drawn as `dreamerjax eval --video` draws an
episode (viz/video.py), written as RUN/videos/seed_S/point_K.mp4 (K: the log point's
index, as checkpoints/K) and sent to TensorBoard (an animated image, eval/video), W&B (a
video in the seed's run) and MLflow (an artifact of the seed's child run, videos/) where
those outputs are on.

The episode is the evaluation's own: played again from the same eval-stream keys of that
log point (run/streams.py) with all run.eval_episodes envs beside it, since the policy's
samples are drawn for the whole batch, and only the first recorded (acting.play with
record; host envs: acting.play_host with the evaluation's acting program on a collector
whose first env of each seed is built to render, run/rollout.render_env). Its return is
that log point's eval_returns[0]. Being a pure function of keys the run already derived,
it draws nothing from the training or evaluation streams: a run's records are the same
with videos on or off.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.defaults import Config
from dreamerjax.envs.host import base as host_lib
from dreamerjax.run import acting, host_loop, loop, outputs, streams
from dreamerjax.run import rollout as rollout_lib
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.plan import Plan
from dreamerjax.run.trainers import to_host
from dreamerjax.viz import video

VIDEO_DIR = "videos"
FPS = 30  # as dreamerjax eval --video
# TensorBoard's copy takes every TB_STRIDE-th pixel of each side (128 pixels high): its GIF
# encoding is the largest host cost of a video, about 10 ms a frame at full size on a
# 2-core CPU, and the mp4 beside it keeps the full picture (benchmarks/video_cost.py).
TB_STRIDE = 2


def due(config: Config, log_index: int) -> bool:
    """A video at every run.video_every_logs-th log point (0: never)."""
    every = config.run.video_every
    return every > 0 and (log_index + 1) % every == 0


def path(out, seed: int, log_index: int) -> Path:
    """RUN/videos/seed_S/point_K.mp4."""
    return Path(out) / VIDEO_DIR / f"seed_{int(seed)}" / f"point_{int(log_index)}.mp4"


def check(plan: Plan) -> None:
    """ValueError (one line naming the flag) before anything compiles when videos are on
    and cannot be made: no H.264 writer (imageio-ffmpeg or PyAV), or a host env whose
    picture fails (a DMC camera without an OpenGL backend, say)."""
    if plan.config.run.video_every <= 0:
        return
    if not any(importlib.util.find_spec(m) for m in ("imageio_ffmpeg", "av")):
        raise ValueError("--video-every (run.video_every_logs): writing mp4 needs "
                         "imageio-ffmpeg (pip install imageio-ffmpeg), or --video-every 0")
    if not plan.setup.host:
        return  # drawn from the env's state and observations (viz/video.draw_state)
    env = None
    try:
        env = rollout_lib.render_env(plan.config)
        obs = env.reset(seed=0)
        video.picture(env, {"obs": {k: np.asarray(v)[None] for k, v in obs.items()}})
    except Exception as e:  # noqa: BLE001 - any failure to draw is the refusal's reason
        raise ValueError(f"--video-every (run.video_every_logs): {plan.config.run.env} "
                         f"cannot render ({type(e).__name__}: {' '.join(str(e).split())}); "
                         "--video-every 0 turns videos off") from e
    finally:
        if env is not None:
            env.close()


class LogVideos:
    """The videos of a run's log points: its programs (made on the first video) and, for
    host envs, the collector it plays on; close() closes that."""

    def __init__(self, plan: Plan, out, loggers=(), primary: bool = True):
        self.plan, self.setup, self.config = plan, plan.setup, plan.config
        self.out, self.loggers, self.primary = out, tuple(loggers), primary
        self._program = None
        self._envs: host_lib.HostCollector | None = None
        self._renders: list = []

    def due(self, log_index: int) -> bool:
        return due(self.config, log_index)

    def write(self, params, point, writer) -> list[Path]:
        """The log point's videos from the agent params [seeds, ...]: the mp4 files (the
        primary's; every process of a multi-host run calls it, the params' gather being a
        collective), the TensorBoard animations and the outputs' videos."""
        policy = to_host(agent_lib.policy_params(self.config.agent, params))
        if not self.primary:
            return []
        files = {}
        for seed, episode in zip(point.seeds, self.episodes(policy, point.log_index),
                                 strict=True):
            images = video.frames(self.config.run.env, episode)
            files[seed] = video.write_video(path(self.out, seed, point.log_index), images,
                                            FPS)
            writer.add_video(seed, point.rows, outputs.VIDEO_KEY,
                             [f[::TB_STRIDE, ::TB_STRIDE] for f in images], FPS)
        outputs.add_videos(self.loggers, point.rows, files)
        return list(files.values())

    def episodes(self, params, log_index: int) -> list[dict]:
        """The first episode of each seed's evaluation at log_index (policy params [seeds,
        ...] on the host), one dict per seed as rollout.rollout gives them."""
        if self.setup.host:
            return self._host_episodes(params, log_index)
        if self._program is None:
            setup = self.setup
            self._program = jax.jit(lambda p, k: first_episodes(setup, p, k))
        keys = streams.keys(self.plan.seeds, "eval", log_index)
        trace = jax.tree.map(np.asarray, self._program(params, keys))
        return [jax.tree.map(lambda x, i=i: x[i], trace) for i in range(len(self.plan.seeds))]

    def _host_episodes(self, params, log_index: int) -> list[dict]:
        setup, seeds = self.setup, self.plan.seeds
        per_seed = setup.run.eval_episodes
        if self._envs is None:
            self._program = host_loop.eval_program(setup, False)
            factory = setup_lib.env_factory(self.config)
            self._renders = [rollout_lib.render_env(self.config) for _ in seeds]
            made = [(lambda env=self._renders[i // per_seed]: env) if i % per_seed == 0
                    else factory for i in range(len(seeds) * per_seed)]
            self._envs = host_lib.HostCollector(host_lib.HostVector(made),
                                                time_limit=setup.run.episode_limit)
        step_keys, env_seeds = host_loop.eval_inputs(setup, seeds, "eval", log_index)
        steps: list[list] = [[] for _ in seeds]

        def on_rows(rows):
            for i, env in enumerate(self._renders):
                j = i * per_seed
                if steps[i] and steps[i][-1][0]["is_last"][0]:
                    continue  # that episode ended: its env has started another
                row = jax.tree.map(lambda x, j=j: np.asarray(x)[j:j + 1], rows)
                steps[i].append((row, video.picture(env, row)))

        acting.play_host(setup, self._envs, self._program, params, env_seeds, step_keys,
                         on_rows=on_rows)
        return [rollout_lib.host_episode(mine) for mine in steps]

    def close(self) -> None:
        if self._envs is not None:
            self._envs.close()
            self._envs = None


def first_episodes(setup, params, keys, mode: bool = False):
    """Each seed's first evaluation episode, every step recorded: acting.evaluate's
    episodes (its keys, its run.eval_episodes envs) played by acting.play with record.
    params [seeds, ...] (agent.policy_params), keys [seeds, 2] -> the trace [seeds,
    limit + 1, ...] (jittable; setup and mode static)."""
    episodes = setup.run.eval_episodes

    def one(p, key):
        k_init, step_keys = streams.episode_keys(key, setup.spec.episode_limit)
        trace = acting.play(setup, p, jax.random.split(k_init, episodes), step_keys, mode,
                            record=True)[2]
        return jax.tree.map(lambda x: x[:, 0], trace)

    return loop.over_seeds(setup, one, params, keys)
