"""Craftax and Craftax-Classic (a JAX Crafter): symbolic vectors or pixel images.

Tasks: Craftax-Classic-Symbolic-v1, Craftax-Classic-Pixels-v1, Craftax-Symbolic-v1,
Craftax-Pixels-v1 (craftax.craftax_env names), built without auto-reset.

Row flags, translated from Craftax's single `done` (which ORs the time limit into
`is_game_over`): is_terminal is the game's end with the time limit taken out (death,
lava, the final boss), evaluated by the suite's own `is_terminal` with an unreachable
`max_timesteps`; a time limit (`timestep >= max_timesteps`, 10,000 steps in Classic as in
Crafter) is is_last only. The reference's Crafter does the same with crafter's discount
(embodied/envs/crafter.py:54-62: is_terminal = discount == 0, which crafter sets only on
death).

Pixels: Craftax renders blocks of `b` pixels (7 in Classic, a 9 x 9 grid of map and
inventory, 63 x 63) as floats in [0, 1]. They are stored as uint8 at the configured
`size` (the reference's env.crafter.size, 64 x 64, configs.yaml:80) with Crafter's own
geometry: each block drawn at `unit = size // grid` pixels, nearest-neighbour (crafter
resizes its textures with PIL NEAREST), centred on a black canvas with the remainder as a
border. At 64 x 64 Classic's 7-pixel blocks are kept as they are and the 64th row and
column are black, as in Crafter's 64 x 64 frames.

Achievements: per episode `log_achievement_<name>` int32, 1 if unlocked during the
episode (the reference logs Crafter's counts under these names with log_keys_max,
configs.yaml:218-223; Craftax keeps only whether each was unlocked, so the episode mean
of a key is its success rate).
"""

from __future__ import annotations

import importlib

import jax.numpy as jnp
import numpy as np
from craftax.craftax_env import make_craftax_env_from_name

from dreamerjax.envs.core import EnvSpec, Step

TASKS = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1",
         "Craftax-Symbolic-v1", "Craftax-Pixels-v1")
DEFAULT_SIZE = (64, 64)  # configs.yaml:80 env.crafter.size
_NEVER = np.iinfo(np.int32).max


def _constants(task: str):
    return importlib.import_module(
        "craftax.craftax_classic.constants" if "Classic" in task else "craftax.craftax.constants")


def resize_indices(native: int, block: int, size: int) -> tuple[np.ndarray, int]:
    """Crafter's geometry on one axis: source pixel per output pixel of the drawn view
    [grid * unit] and the border before it. native = grid * block pixels."""
    grid = native // block
    unit = size // grid
    if unit < 1:
        raise ValueError(f"size {size} is smaller than the {grid}-block grid")
    out = np.arange(grid * unit)
    blk, off = out // unit, out % unit
    # PIL NEAREST samples at pixel centres: floor((off + 0.5) * block / unit).
    src = blk * block + np.minimum(((off + 0.5) * block / unit).astype(np.int64), block - 1)
    return src, (size - grid * unit) // 2


def pixels_to_image(pixels, block: int, size: tuple[int, int]):
    """Craftax pixels [H, W, 3] float in [0, 1] -> uint8 [*size, 3] (Crafter geometry)."""
    img = jnp.round(jnp.clip(pixels, 0.0, 1.0) * 255.0).astype(jnp.uint8)
    rows, top = resize_indices(pixels.shape[0], block, size[0])
    cols, left = resize_indices(pixels.shape[1], block, size[1])
    view = img[rows][:, cols]
    canvas = jnp.zeros((*size, img.shape[-1]), jnp.uint8)
    return canvas.at[top:top + len(rows), left:left + len(cols)].set(view)


def make(task: str, episode_limit: int = 0, size: tuple[int, int] = DEFAULT_SIZE) -> EnvSpec:
    if task not in TASKS:
        raise ValueError(f"unknown craftax env {task!r}; craftax has: {', '.join(TASKS)}")
    size = tuple(int(s) for s in size)
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f"craftax size {size}: expected (height, width)")
    env = make_craftax_env_from_name(task, auto_reset=False)
    params = env.default_params
    if episode_limit:
        params = params.replace(max_timesteps=int(episode_limit))
    never = params.replace(max_timesteps=_NEVER)
    consts = _constants(task)
    names = [a.name.lower() for a in consts.Achievement]
    keys = tuple((f"log_achievement_{n}", "int32") for n in names)
    pixels = "Pixels" in task
    native = tuple(int(d) for d in env.observation_space(params).shape)
    if pixels:
        block = int(consts.BLOCK_PIXEL_SIZE_AGENT)
        entry = ("image", (*size, native[-1]), "uint8")
        convert = lambda o: pixels_to_image(o, block, size)  # noqa: E731
    else:
        entry = ("vector", native, "float32")
        convert = lambda o: jnp.asarray(o, jnp.float32)  # noqa: E731

    def reset(key):
        obs, state = env.reset_env(key, params)
        return state, {entry[0]: convert(obs)}

    def step(key, state, action, length):
        del length  # Craftax counts its own time (state.timestep)
        obs, state, reward, _, _ = env.step_env(key, state, action, params)
        done_ach = state.achievements.astype(jnp.int32)
        return Step(
            env_state=state, obs={entry[0]: convert(obs)},
            reward=jnp.asarray(reward, jnp.float32),
            terminated=jnp.asarray(env.is_terminal(state, never), bool),
            truncated=state.timestep >= params.max_timesteps,
            stats={k: done_ach[i] for i, (k, _) in enumerate(keys)})

    return EnvSpec(
        env_id=task, suite="craftax", task=task, obs_space=(entry,), discrete=True,
        num_actions=int(env.action_space(params).n), action_dims=0, action_low=(),
        action_high=(), episode_limit=int(params.max_timesteps), reset=reset, step=step,
        env_action_shape=(), episode_keys=keys, env=env, params=params)
