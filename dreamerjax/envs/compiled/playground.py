"""MuJoCo Playground's DeepMind Control Suite on MJX (proprioceptive tasks).

Tasks are Playground's names (CartpoleBalance, WalkerWalk, CheetahRun, ...; see
`mujoco_playground.dm_control_suite.ALL_ENVS`). Run as the reference runs DMC
(embodied/envs/dmc.py, configs.yaml:84 `env.dmc.repeat: 2`): the action repeated twice,
the 1,000 control steps of an episode (Playground's `episode_length`, the suite's time
limit) giving 500 agent steps that end as a time limit, not a termination. Playground's
`done` (NaN physics) is a termination. MJX runs with `impl="jax"` (Playground's default,
"warp", needs a GPU); actions in [-1, 1] map to the actuators' ctrlrange (the
reference's NormalizeAction; an unlimited actuator takes the clipped action as is).
"""

from __future__ import annotations

import math

import jax
import numpy as np
from mujoco_playground import dm_control_suite

from dreamerjax.envs.compiled import physics
from dreamerjax.envs.core import EnvSpec

DEFAULT_REPEAT = 2  # configs.yaml:84 env.dmc.repeat


def make(task: str, episode_limit: int = 0, repeat: int = DEFAULT_REPEAT,
         impl: str = "jax") -> EnvSpec:
    tasks = dm_control_suite.ALL_ENVS
    if task not in tasks:
        raise ValueError(f"unknown playground env {task!r}; the Playground DM Control "
                         f"Suite has: {', '.join(tasks)}")
    cfg = dm_control_suite.get_default_config(task)
    if cfg.get("vision", False):
        raise ValueError(f"playground {task}: vision tasks are not supported")
    env = dm_control_suite.load(task, config_overrides={"impl": impl})
    model = env.mj_model
    limited = np.asarray(model.actuator_ctrllimited, bool)
    ctrl = np.asarray(model.actuator_ctrlrange, np.float64).reshape(-1, 2)
    low = np.where(limited, ctrl[:, 0], -1.0)
    high = np.where(limited, ctrl[:, 1], 1.0)
    limit = episode_limit or math.ceil(int(cfg.episode_length) / int(repeat))
    shape = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    return physics.make_spec(
        suite="playground", task=task, env=env, obs_size=env.observation_size, low=low,
        high=high, repeat=int(repeat), episode_limit=int(limit), metrics=shape.metrics)
