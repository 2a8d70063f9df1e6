"""Gymnasium environments as host envs (`--env gym_ID`; the reference's FromGym,
embodied/envs/from_gym.py at 29eb964, on Gymnasium's five-value step).

- `gym_CartPole-v1`: any registered id; `gym_my_pkg:MyEnv-v0` imports `my_pkg` first
  (Gymnasium's own `module:id` form), so a user's env registered there is found.
- Python API: `register("MyEnv-v0", factory)` then `gym_MyEnv-v0` in a run's config, or
  `GymEnv(factory)` for one env instance.

Observations: a Dict space is flattened to named keys joined by '_' (the reference joins
with '/', from_gym.py:95-105; the agent's parameter paths take no '/', so '_' as FromDM
writes its keys, from_dm.py:37);
any other space becomes one key, `image` when it is a uint8 array of rank 3 and `vector`
otherwise (the reference names every single observation `image`, from_gym.py:10, 36).
Box leaves that are not images become flat float32 vectors (a scalar is [1], as
ExpandScalars does, wrappers.py:94-129); Discrete leaves become float32 one-hots (the
reference's encoder one-hots them, nets.py:250, jaxutils `onehot_dict`); MultiBinary
leaves float32 vectors. Actions: Discrete (index, `start` added back) or Box (normalised
to [-1, 1], host.normalized_action). Termination and truncation are Gymnasium's own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from dreamerjax.envs.host.base import (
    HostEnv,
    HostSpec,
    box_fields,
    check_obs_space,
    normalized_action,
)

# SDL's own variables while Gymnasium's renderer (pygame, for the classic-control and
# Box2D envs) initialises SDL for an rgb_array picture: its dummy audio and window
# drivers, since the picture is drawn off-screen and makes no sound, where probing the
# machine's sound card and display writes ALSA's and SDL's errors to stderr on a machine
# without them ("ALSA lib ... Unknown PCM default", "XDG_RUNTIME_DIR is invalid").
# Set only for that call and only where the caller has chosen no driver (_quiet_sdl).
SDL_DRIVERS = {"SDL_AUDIODRIVER": "dummy", "SDL_VIDEODRIVER": "dummy"}


@contextlib.contextmanager
def _quiet_sdl():
    """SDL_DRIVERS in this process's environment while pygame is not initialised (SDL
    reads them when it starts), unless the caller set them; the environment as it was
    after."""
    pygame = sys.modules.get("pygame")
    if pygame is not None and pygame.get_init():
        yield  # SDL started already: it reads nothing now
        return
    chosen = {k: v for k, v in SDL_DRIVERS.items() if k not in os.environ}
    os.environ.update(chosen)
    try:
        yield
    finally:
        for key in chosen:
            os.environ.pop(key, None)


def _flatten_space(space, prefix: str = "") -> dict[str, Any]:
    from gymnasium import spaces as gs
    if isinstance(space, gs.Dict):
        out = {}
        for key, sub in space.spaces.items():
            out.update(_flatten_space(sub, f"{prefix}_{key}" if prefix else str(key)))
        return out
    return {prefix: space}


def _flatten_value(value, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out = {}
        for key, sub in value.items():
            out.update(_flatten_value(sub, f"{prefix}_{key}" if prefix else str(key)))
        return out
    return {prefix: value}


class _Leaf:
    """One observation key: how a Gymnasium value becomes a float32 vector or uint8 image."""

    def __init__(self, env_id: str, name: str, space):
        from gymnasium import spaces as gs
        self.name = name
        self.onehot = 0
        self.start = 0
        if isinstance(space, gs.Discrete):
            self.onehot, self.start = int(space.n), int(space.start)
            self.shape, self.dtype = (self.onehot,), "float32"
        elif isinstance(space, (gs.Box, gs.MultiBinary)):
            shape = tuple(int(d) for d in space.shape)
            if len(shape) == 3 and np.dtype(space.dtype) == np.uint8:
                self.shape, self.dtype = shape, "uint8"
            elif len(shape) <= 2:
                self.shape, self.dtype = (int(np.prod(shape)) if shape else 1,), "float32"
            else:
                raise ValueError(f"{env_id}: observation {name!r} {space}: arrays of rank "
                                 f"{len(shape)} must be uint8 images [H, W, C]")
        else:
            raise ValueError(f"{env_id}: observation {name!r} has space "
                             f"{type(space).__name__}; supported: Box, Discrete, "
                             "MultiBinary, Dict of those")

    def convert(self, value) -> np.ndarray:
        if self.onehot:
            out = np.zeros((self.onehot,), np.float32)
            out[int(value) - self.start] = 1.0
            return out
        if self.dtype == "uint8":
            return np.asarray(value, np.uint8)
        return np.asarray(value, np.float32).reshape(self.shape)


class GymEnv(HostEnv):
    """A Gymnasium env (by id, or built by `factory()`) with the host env interface."""

    def __init__(self, env: str | Callable[[], Any], env_id: str | None = None,
                 **make_kwargs):
        import gymnasium
        from gymnasium import spaces as gs
        if isinstance(env, str):
            try:
                self._env = gymnasium.make(env, **make_kwargs)
            except gymnasium.error.Error as e:
                raise ValueError(f"--env gym_{env}: {e}") from e
            env_id = env_id or f"gym_{env}"
        else:
            if make_kwargs:
                raise ValueError("make_kwargs only apply to an env id, not a factory")
            self._env = env()
            env_id = env_id or f"gym_{type(self._env.unwrapped).__name__}"
        self.env_id = env_id
        obs_space = self._env.observation_space
        self._dict = isinstance(obs_space, gs.Dict)
        if self._dict:
            flat = _flatten_space(obs_space)
        else:
            shape = getattr(obs_space, "shape", None) or ()
            image = (isinstance(obs_space, gs.Box) and len(shape) == 3
                     and np.dtype(obs_space.dtype) == np.uint8)
            flat = {"image" if image else "vector": obs_space}
        self._leaves = [_Leaf(env_id, name, sp) for name, sp in flat.items()]
        act = self._env.action_space
        box: dict = {}
        if isinstance(act, gs.Discrete):
            discrete, n, dims = True, int(act.n), 0
            self._act_start = int(act.start)
        elif isinstance(act, gs.Box):
            discrete, n, dims = False, 0, int(np.prod(act.shape))
            self._act_shape = tuple(act.shape)
            self._act_dtype = act.dtype
            # The Box's own dtype, as the reference's Space keeps it (from_gym.py:119-122):
            # a float32 Box is normalised in float32 (host.normalized_action).
            self._low = np.broadcast_to(np.asarray(act.low), act.shape).ravel()
            self._high = np.broadcast_to(np.asarray(act.high), act.shape).ravel()
            box = box_fields(self._low, self._high, self._act_shape)
        else:
            raise ValueError(f"{env_id}: action space {type(act).__name__} is not supported "
                             "(Discrete or Box)")
        spec = getattr(self._env, "spec", None)
        limit = int(getattr(spec, "max_episode_steps", None) or 0)
        self.spec = HostSpec(
            env_id=env_id,
            obs_space=check_obs_space(env_id, tuple(
                (leaf.name, leaf.shape, leaf.dtype) for leaf in self._leaves)),
            discrete=discrete, num_actions=n, action_dims=dims, episode_limit=limit,
            action_start=self._act_start if discrete else 0, **box)

    @property
    def env(self):
        return self._env

    def _obs(self, obs) -> dict[str, np.ndarray]:
        flat = _flatten_value(obs) if self._dict else {self._leaves[0].name: obs}
        return {leaf.name: leaf.convert(flat[leaf.name]) for leaf in self._leaves}

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        obs, _ = self._env.reset(seed=seed)
        return self._obs(obs)

    def step(self, action):
        if self.spec.discrete:
            a = int(action) + self._act_start
        else:
            a = normalized_action(np.ravel(action), self._low, self._high)
            a = a.reshape(self._act_shape).astype(self._act_dtype)
        obs, reward, terminated, truncated, info = self._env.step(a)
        return self._obs(obs), float(reward), bool(terminated), bool(truncated), info

    def render(self):
        """Gymnasium's own picture when the env was made with render_mode="rgb_array"."""
        if getattr(self._env, "render_mode", None) != "rgb_array":
            return None
        with _quiet_sdl():
            return self._env.render()

    def close(self) -> None:
        try:
            self._env.close()
        except Exception:  # noqa: BLE001, S110 - closing is best effort (from_gym.py:89-93)
            pass


make = GymEnv  # the registry's constructor: make(task, env_id=..., **settings)


def register(gym_id: str, factory: Callable[..., Any], **kwargs) -> str:
    """Register a user's env factory with Gymnasium and return the dreamerjax env id.

    `register("MyEnv-v0", MyEnv)` makes `--env gym_MyEnv-v0` (and `train(...)` with
    `run.env="gym_MyEnv-v0"`) build `MyEnv()`. Worker processes (parallel host envs) only
    see registrations made at the import of a module: register there, or use the
    `gym_my_pkg:MyEnv-v0` form, which imports `my_pkg` in each worker.
    """
    import gymnasium
    gymnasium.register(id=gym_id, entry_point=factory, **kwargs)
    return f"gym_{gym_id}"
