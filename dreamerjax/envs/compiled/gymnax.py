"""gymnax envs (every registered id whose spaces the agent can take).

We call gymnax's `reset_env` / `step_env` (no auto-reset) and its `is_truncated`, so a
time limit (post-step `time >= max_steps_in_episode`) stays apart from termination.

Observations, as the reference's encoder would see them:
- rank 1: "vector" float32;
- rank 0 or 2 (a Discrete observation, bsuite's Catch/DeepSea grids): "vector" float32,
  one-hot for a Discrete observation and flattened for a grid, as the reference's
  encoder does with such keys (one-hot of discrete spaces, dreamerv3/jaxutils.py:729;
  vector inputs flattened after the batch axes, dreamerv3/nets.py:239, 807);
- rank 3: "image"; MinAtar's boolean channel maps are stored as uint8 0/255 (exact:
  the agent's /255 gives back the same 0/1 floats, at a quarter of the memory), other
  rank-3 observations stay float32 images.
"""

from __future__ import annotations

from dreamerjax.envs import deferred

deferred.defer("seaborn")  # imported by gymnax's pong for its render only (~90 MiB)
deferred.defer("matplotlib.pyplot")  # by gymnax's bsuite catch, for its render (~0.5 s)

import gymnax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from gymnax.environments import spaces as gx_spaces  # noqa: E402

from dreamerjax.envs.core import EnvSpec, Step, box_bounds  # noqa: E402


def _obs_converter(env_id: str, space):
    """(obs entry (name, shape, dtype), fn raw obs -> stored obs)."""
    if isinstance(space, gx_spaces.Discrete):
        n = int(space.n)
        return ("vector", (n,), "float32"), lambda o: jnp.eye(n, dtype=jnp.float32)[o]
    if not isinstance(space, gx_spaces.Box):
        raise ValueError(f"{env_id}: observation space {type(space).__name__} is not "
                         "supported (Box or Discrete)")
    shape = tuple(int(d) for d in space.shape)
    if len(shape) == 1:
        return ("vector", shape, "float32"), lambda o: jnp.asarray(o, jnp.float32)
    if len(shape) in (0, 2):
        size = int(np.prod(shape))
        return ("vector", (size,), "float32"), lambda o: jnp.asarray(o, jnp.float32).reshape(
            size)
    if len(shape) == 3:
        if env_id.endswith("-MinAtar"):
            return ("image", shape, "uint8"), lambda o: (jnp.asarray(o) > 0).astype(
                jnp.uint8) * jnp.uint8(255)
        return ("image", shape, "float32"), lambda o: jnp.asarray(o, jnp.float32)
    raise ValueError(f"{env_id}: observation shape {shape} is not supported "
                     "(vectors, grids or images)")


def make(task: str, episode_limit: int = 0) -> EnvSpec:
    """A gymnax env by its gymnax id (e.g. CartPole-v1, Breakout-MinAtar)."""
    if task not in gymnax.registered_envs:
        raise ValueError(f"unknown gymnax env {task!r}; gymnax has: "
                         f"{', '.join(gymnax.registered_envs)}")
    try:
        env, params = gymnax.make(task)
    except Exception as e:  # e.g. MNISTBandit downloads its data at construction
        raise ValueError(f"gymnax env {task!r} cannot be built here: "
                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                         ) from None
    if episode_limit:
        params = params.replace(max_steps_in_episode=int(episode_limit))
    obs_entry, convert = _obs_converter(task, env.observation_space(params))
    act_space = env.action_space(params)
    if isinstance(act_space, gx_spaces.Discrete):
        discrete, num_actions, dims, low, high = True, int(act_space.n), 0, (), ()
        env_shape = ()
    elif isinstance(act_space, gx_spaces.Box):
        env_shape = tuple(int(d) for d in act_space.shape)
        dims = int(np.prod(env_shape))
        low, high = box_bounds(act_space.low, act_space.high, dims)
        discrete, num_actions = False, 0
    else:
        raise ValueError(f"{task}: action space {type(act_space).__name__} is not "
                         "supported (Discrete or Box)")
    if discrete and num_actions < 2:
        raise ValueError(f"{task}: a discrete action space with {num_actions} action")

    def reset(key):
        obs, state = env.reset_env(key, params)
        return state, {obs_entry[0]: convert(obs)}

    def step(key, state, action, length):
        del length  # gymnax counts its own time (state.time)
        obs, state, reward, terminated, _ = env.step_env(key, state, action, params)
        return Step(env_state=state, obs={obs_entry[0]: convert(obs)},
                    reward=jnp.asarray(reward, jnp.float32),
                    terminated=jnp.asarray(terminated, bool),
                    truncated=jnp.asarray(env.is_truncated(state, params), bool), stats={})

    return EnvSpec(
        env_id=task, suite="gymnax", task=task, obs_space=(obs_entry,), discrete=discrete,
        num_actions=num_actions, action_dims=dims, action_low=low, action_high=high,
        episode_limit=int(params.max_steps_in_episode), reset=reset, step=step,
        env_action_shape=env_shape, env=env, params=params)
