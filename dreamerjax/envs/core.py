"""gymnax environments as observation-aligned rows (protocol section 2.1).

One env emits one row per tick. An episode of L agent steps gives L + 1 rows:

    row 0      reset observation, reward 0, is_first
    row k      observation after step k and the reward of step k   (k = 1 .. L)
    row L      also is_last; is_terminal only on a real termination

A time-limit end (post-step ``time >= max_steps_in_episode``, gymnax's own truncation
test) is is_last without is_terminal. The env is held on its is_last tick: the next call
emits the next episode's reset row and ignores the action it is given. This is the row
stream the reference's driver produces with ``reset = is_last`` (embodied/core/driver.py:
34-38, 70-74) from an env whose step returns the final observation.

Everything here is a pure function of one env's pytree state; callers vmap over envs and
seeds. We call gymnax's ``step_env`` / ``reset_env`` (no auto-reset) and do the reset row
ourselves, so termination and truncation stay apart.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

# gymnax imports its bsuite MNIST loader (and with it `six`) at package import.
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces as gx_spaces

ENV_IDS: tuple[str, ...] = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
)
"""The gymnax 1.0.1 environments this adapter supports (each checked by a short rollout)."""


@dataclasses.dataclass(frozen=True, eq=False)
class EnvSpec:
    """A gymnax env with its params and the facts the agent needs about it.

    Compared and hashed by identity; `make_env` caches, so one id gives one spec object
    (safe to close over or to pass as a static argument).

    Continuous actions: the agent acts in [-1, 1]^dims; `to_env_action` clips to that box
    and rescales to [low, high] (the reference's ClipAction after NormalizeAction,
    dreamerv3/main.py:228-245, embodied/core/wrappers.py:63-92).
    """

    env_id: str
    env: Any  # gymnax Environment
    params: Any  # gymnax EnvParams
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    is_image: bool  # 3-D observation [H, W, C] (MinAtar)
    discrete: bool
    num_actions: int  # classes of a discrete action; 0 when continuous
    action_dims: int  # size of a continuous action vector; 0 when discrete
    action_low: tuple[float, ...]  # per-dim env bounds (continuous only)
    action_high: tuple[float, ...]
    episode_limit: int  # params.max_steps_in_episode

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one stored action: () for an index, (dims,) for a vector."""
        return () if self.discrete else (self.action_dims,)

    @property
    def action_dtype(self) -> jnp.dtype:
        return jnp.int32 if self.discrete else jnp.float32


@functools.cache
def make_env(env_id: str, episode_limit: int = 0) -> EnvSpec:
    """Build the spec of a supported gymnax env.

    episode_limit > 0 replaces params.max_steps_in_episode (0 keeps the env's own).
    Raises ValueError for an unknown id before anything is compiled.
    """
    if env_id not in ENV_IDS:
        raise ValueError(f"Unknown env id {env_id!r}; known ids: {', '.join(ENV_IDS)}")
    if episode_limit < 0:
        raise ValueError(f"episode_limit must be >= 0, got {episode_limit}")
    env, params = gymnax.make(env_id)
    if episode_limit:
        params = params.replace(max_steps_in_episode=int(episode_limit))
    obs_space = env.observation_space(params)
    obs_shape = tuple(int(d) for d in obs_space.shape)
    act_space = env.action_space(params)
    if isinstance(act_space, gx_spaces.Discrete):
        discrete, num_actions, dims, low, high = True, int(act_space.n), 0, (), ()
    elif isinstance(act_space, gx_spaces.Box):
        dims = int(np.prod(act_space.shape))
        low = tuple(float(x) for x in np.broadcast_to(act_space.low, (dims,)))
        high = tuple(float(x) for x in np.broadcast_to(act_space.high, (dims,)))
        discrete, num_actions = False, 0
    else:  # pragma: no cover - every listed id is Discrete or Box
        raise ValueError(f"{env_id}: unsupported action space {type(act_space).__name__}")
    return EnvSpec(
        env_id=env_id,
        env=env,
        params=params,
        obs_shape=obs_shape,
        obs_dtype=np.dtype(np.float32),
        is_image=len(obs_shape) == 3,
        discrete=discrete,
        num_actions=num_actions,
        action_dims=dims,
        action_low=low,
        action_high=high,
        episode_limit=int(params.max_steps_in_episode),
    )


@struct.dataclass
class CollectorState:
    """One env's collector state (vmap adds leading axes)."""

    env_state: Any  # gymnax EnvState
    is_last: jax.Array  # bool: the last emitted row ended an episode -> next call resets
    length: jax.Array  # int32: steps taken in the current episode
    score: jax.Array  # float32: sum of the current episode's step rewards


@struct.dataclass
class EpisodeEnd:
    """Reported with every row; meaningful where `ended` (the row is an episode's is_last)."""

    ended: jax.Array  # bool
    length: jax.Array  # int32: agent steps L of the finished episode
    score: jax.Array  # float32: sum of its step rewards
    terminal: jax.Array  # bool: real termination (False for a time-limit end)


Row = dict[str, jax.Array]
"""obs [*obs_shape] f32, reward f32, is_first / is_last / is_terminal bool."""


def _row(obs, reward, is_first, is_last, is_terminal) -> Row:
    return dict(
        obs=jnp.asarray(obs, jnp.float32),
        reward=jnp.asarray(reward, jnp.float32),
        is_first=jnp.asarray(is_first, bool),
        is_last=jnp.asarray(is_last, bool),
        is_terminal=jnp.asarray(is_terminal, bool),
    )


def _strong(x) -> jax.Array:
    """An array with a fixed (not weak) dtype, so scan carries keep one type."""
    x = jnp.asarray(x)
    return jnp.array(x, dtype=x.dtype)


def to_env_action(spec: EnvSpec, action: jax.Array) -> jax.Array:
    """Agent action -> the action gymnax receives.

    Discrete: the int32 index as is. Continuous: clip to [-1, 1], rescale to [low, high]
    per dim, reshaped to the env's action shape.
    """
    if spec.discrete:
        return jnp.asarray(action, jnp.int32)
    a = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
    low = jnp.asarray(spec.action_low, jnp.float32)
    high = jnp.asarray(spec.action_high, jnp.float32)
    a = (a + 1.0) / 2.0 * (high - low) + low
    return a.reshape(spec.env.action_space(spec.params).shape)


def collector_init(spec: EnvSpec, key: jax.Array) -> tuple[CollectorState, Row]:
    """Reset the env and emit its first row (reset obs, reward 0, is_first)."""
    obs, env_state = spec.env.reset_env(key, spec.params)
    state = CollectorState(
        env_state=jax.tree.map(_strong, env_state),
        is_last=jnp.asarray(False),
        length=jnp.asarray(0, jnp.int32),
        score=jnp.asarray(0.0, jnp.float32),
    )
    return state, _row(obs, 0.0, True, False, False)


def collector_step(
    spec: EnvSpec, state: CollectorState, action: jax.Array, key: jax.Array
) -> tuple[CollectorState, Row, EpisodeEnd]:
    """Emit the env's next row.

    If the previous row was is_last, this is the next episode's reset row and `action` is
    ignored; otherwise the env takes `action` (int32 index or float32 [dims] in [-1, 1]).
    Both branches are computed and selected (what vmap would do with a cond anyway).
    """
    key_reset, key_step = jax.random.split(key)
    reset_obs, reset_env_state = spec.env.reset_env(key_reset, spec.params)
    obs, env_state, reward, terminated, _ = spec.env.step_env(
        key_step, state.env_state, to_env_action(spec, action), spec.params)
    truncated = spec.env.is_truncated(env_state, spec.params)
    terminated = jnp.asarray(terminated, bool)
    is_last = terminated | jnp.asarray(truncated, bool)
    reward = jnp.asarray(reward, jnp.float32)

    reset = state.is_last
    pick = lambda a, b: jnp.where(reset, a, b)  # noqa: E731
    length = jnp.where(reset, 0, state.length + 1).astype(jnp.int32)
    score = jnp.where(reset, 0.0, state.score + reward).astype(jnp.float32)
    row = _row(
        pick(reset_obs, obs),
        pick(0.0, reward),
        reset,
        ~reset & is_last,
        ~reset & terminated,
    )
    new_state = CollectorState(
        env_state=jax.tree.map(
            lambda a, b, old: pick(a, b).astype(old.dtype),
            reset_env_state, env_state, state.env_state),
        is_last=row["is_last"],
        length=length,
        score=score,
    )
    end = EpisodeEnd(ended=row["is_last"], length=length, score=score,
                     terminal=row["is_terminal"])
    return new_state, row, end


def replay_row(row: Row, action: jax.Array, deter: jax.Array, stoch: jax.Array) -> Row:
    """The row as the replay stores it: the env row plus the policy's outputs at it.

    `action` is the action chosen at this row (taken to produce the next row); it is zeroed
    on is_last rows, whose action no env step uses (embodied/core/driver.py:70-74).
    `deter` [..., D] f32 and `stoch` [..., S] int32 class indices are the policy's posterior
    at this row (agent.py:147-150). Works for one row or rows with leading axes.
    """
    is_last = row["is_last"]
    mask = is_last.reshape(is_last.shape + (1,) * (action.ndim - is_last.ndim))
    action = jnp.where(mask, jnp.zeros_like(action), action)
    return dict(row, action=action, deter=jnp.asarray(deter, jnp.float32),
                stoch=jnp.asarray(stoch, jnp.int32))
