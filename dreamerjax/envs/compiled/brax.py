"""Brax envs (ant, halfcheetah, hopper, humanoid, walker2d, ...; `brax.envs._envs`).

Brax's own `done` is a termination (e.g. the ant leaving its healthy height range); the
time limit is ours, 1,000 agent steps by default (Brax's training default
`episode_length`), without action repeat (Brax trains with `action_repeat=1`). Actions in
[-1, 1] map to the actuators' ctrl_range. `backend` is Brax's physics pipeline
("generalized", Brax's default; "positional", "spring" or "mjx").
"""

from __future__ import annotations

import jax
from brax import envs as brax_envs

from dreamerjax.envs.compiled import physics
from dreamerjax.envs.core import EnvSpec

DEFAULT_EPISODE_LENGTH = 1000
BACKENDS = ("generalized", "positional", "spring", "mjx")


def make(task: str, episode_limit: int = 0, backend: str = "generalized",
         repeat: int = 1) -> EnvSpec:
    tasks = sorted(brax_envs._envs)  # noqa: SLF001 - brax's registry of env names
    if task not in tasks:
        raise ValueError(f"unknown brax env {task!r}; brax has: {', '.join(tasks)}")
    if backend not in BACKENDS:
        raise ValueError(f"brax backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    env = brax_envs.get_environment(task, backend=backend)
    ctrl = env.sys.actuator.ctrl_range
    shape = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    return physics.make_spec(
        suite="brax", task=task, env=env, obs_size=env.observation_size, low=ctrl[:, 0],
        high=ctrl[:, 1], repeat=int(repeat),
        episode_limit=int(episode_limit or DEFAULT_EPISODE_LENGTH), metrics=shape.metrics)
