"""Compiled environments as observation-aligned rows (protocol section 2.1).

One env emits one row per tick. An episode of L agent steps gives L + 1 rows:

    row 0      reset observation, reward 0, is_first
    row k      observation after step k and the reward of step k   (k = 1 .. L)
    row L      also is_last; is_terminal only on a real termination

A time-limit end (the suite's own limit, or `episode_limit` agent steps) is is_last
without is_terminal. The env is held on its is_last tick: the next call emits the next
episode's reset row and ignores the action it is given. This is the row stream the
reference's driver produces with ``reset = is_last`` (embodied/core/driver.py:34-38,
70-74) from an env whose step returns the final observation.

Every suite module (envs/compiled/gymnax.py, craftax.py, playground.py, brax.py) builds an
`EnvSpec` around two pure functions of one env, `reset` and `step`, written against the
suite's non-auto-reset API and returning termination and truncation apart; the row
logic, the held is_last tick and the episode bookkeeping live here, once. Callers vmap
over envs and seeds.

Observations are a dict of named keys, `EnvSpec.obs_space` = ((name, shape, dtype), ...):
vectors float32 [D] ("vector"), images uint8 [H, W, C] ("image").
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dreamerjax.envs import registry

ObsSpace = tuple[tuple[str, tuple[int, ...], str], ...]
"""(name, shape, dtype_str) per observation key, in the env's order."""


@struct.dataclass
class Step:
    """What a suite's `step` returns for one env step (all arrays of one env)."""

    env_state: Any
    obs: dict  # {name: array} in the stored dtypes of EnvSpec.obs_space
    reward: jax.Array  # float32
    terminated: jax.Array  # bool: a real termination (the MDP ended)
    truncated: jax.Array  # bool: a time limit
    stats: dict  # {name: array} per-episode keys (EnvSpec.episode_keys), read where ended


@dataclasses.dataclass(frozen=True, eq=False)
class EnvSpec:
    """A compiled env and the facts the agent needs about it.

    Compared and hashed by identity; `make_env` caches, so one id gives one spec object
    (safe to close over or to pass as a static argument).

    reset(key) -> (env_state, obs); step(key, env_state, env_action, length) -> Step,
    where `length` is the episode's agent steps including this one (int32, for suites
    whose time limit the adapter keeps). Continuous actions: the agent acts in
    [-1, 1]^dims; `to_env_action` clips to that box and rescales to [low, high] (the
    reference's ClipAction after NormalizeAction, dreamerv3/main.py:228-245,
    embodied/core/wrappers.py:63-92).

    dict_obs: rows carry `obs` as {name: array} (True) or, for a loop that still takes one
    array, the single observation key as float32 with uint8 images divided by 255 (False,
    the default until the loop takes dict observations).
    """

    env_id: str
    suite: str
    task: str
    obs_space: ObsSpace
    discrete: bool
    num_actions: int  # classes of a discrete action; 0 when continuous
    action_dims: int  # size of a continuous action vector; 0 when discrete
    action_low: tuple[float, ...]  # per-dim env bounds (continuous only)
    action_high: tuple[float, ...]
    episode_limit: int  # agent steps after which an episode is cut (a time limit)
    reset: Callable = dataclasses.field(repr=False)
    step: Callable = dataclasses.field(repr=False)
    env_action_shape: tuple[int, ...] = ()  # the action's shape as the suite takes it
    episode_keys: tuple[tuple[str, str], ...] = ()  # (name, dtype) of Step.stats
    dict_obs: bool = False
    env: Any = dataclasses.field(default=None, repr=False)  # the suite's env object
    params: Any = dataclasses.field(default=None, repr=False)  # its params, if any

    def __post_init__(self):
        from dreamerjax.algo.spaces import check_obs_entry  # the agent's one check

        for name, shape, dtype in self.obs_space:
            try:
                check_obs_entry(name, tuple(shape), dtype)
            except ValueError as e:
                raise ValueError(f"{self.env_id}: {e}") from None
        if not self.dict_obs and len(self.obs_space) != 1:
            raise ValueError(f"{self.env_id} has observation keys "
                             f"{[n for n, _, _ in self.obs_space]}: it needs dict_obs=True")

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one stored action: () for an index, (dims,) for a vector."""
        return () if self.discrete else (self.action_dims,)

    @property
    def action_dtype(self) -> jnp.dtype:
        return jnp.int32 if self.discrete else jnp.float32

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """The shape of the only observation key (single-array loops)."""
        if len(self.obs_space) != 1:
            raise ValueError(f"{self.env_id} has {len(self.obs_space)} observation keys")
        return self.obs_space[0][1]


@functools.cache
def make_env(env_id: str, episode_limit: int = 0, *, dict_obs: bool = False,
             **options) -> EnvSpec:
    """Build the spec of `SUITE_TASK` (a bare id is a gymnax task).

    episode_limit > 0 replaces the env's own time limit in agent steps (0 keeps it).
    options go to the suite's `make` (e.g. craftax `size=(64, 64)`, playground `repeat`).
    Raises ValueError (MissingExtra for a suite that is not installed) before anything
    is compiled.
    """
    if episode_limit < 0:
        raise ValueError(f"episode_limit must be >= 0, got {episode_limit}")
    suite, task = registry.parse_env_id(env_id)
    if not suite.compiled:
        raise ValueError(f"env id {env_id!r}: suite {suite.name!r} runs on the host, "
                         "not in the compiled collector")
    spec = suite.load(env_id).make(task, int(episode_limit), **options)
    return dataclasses.replace(spec, env_id=env_id, dict_obs=bool(dict_obs))


def suite_options(env_config, env_id: str) -> dict:
    """make_env's suite options from a config's `env.<suite>` section (a dataclass), e.g.
    env.craftax.size -> size=(64, 64); {} when the config has no section for the suite.
    Lists become tuples (make_env caches on its arguments)."""
    suite, _ = registry.parse_env_id(env_id)
    section = getattr(env_config, suite.name, None)
    if section is None:
        return {}
    fields = dataclasses.asdict(section) if dataclasses.is_dataclass(section) else dict(section)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}


def row_spec(spec: EnvSpec) -> dict:
    """The schema of one env row as `collector_init` / `collector_step` emit it:
    {obs: {name: ShapeDtypeStruct} (or one ShapeDtypeStruct when not dict_obs),
    reward f32, is_first / is_last / is_terminal bool}, all of one env."""
    sd = jax.ShapeDtypeStruct
    if spec.dict_obs:
        obs = {n: sd(s, jnp.dtype(t)) for n, s, t in spec.obs_space}
    else:
        obs = sd(spec.obs_shape, jnp.float32)
    return dict(obs=obs, reward=sd((), jnp.float32), is_first=sd((), jnp.bool_),
                is_last=sd((), jnp.bool_), is_terminal=sd((), jnp.bool_))


def spaces_of(spec: EnvSpec, enc_spaces: str = ".*", dec_spaces: str = ".*"):
    """The agent's Spaces of this env (with the reference's enc/dec.spaces regexes), in
    the dtypes its rows carry: the stored ones (uint8 images) for a dict_obs spec, the
    single key as float32 otherwise."""
    from dreamerjax.algo import spaces as spaces_lib
    n = spec.num_actions if spec.discrete else spec.action_dims
    obs = spec.obs_space
    if not spec.dict_obs:
        obs = tuple((name, shape, "float32") for name, shape, _ in obs)
    return spaces_lib.Spaces(obs, spec.discrete, int(n), enc_spaces, dec_spaces)


@struct.dataclass
class CollectorState:
    """One env's collector state (vmap adds leading axes)."""

    env_state: Any  # the suite's env state, its zero-size arrays dropped (None)
    is_last: jax.Array  # bool: the last emitted row ended an episode -> next call resets
    length: jax.Array  # int32: steps taken in the current episode
    score: jax.Array  # float32: sum of the current episode's step rewards


@struct.dataclass
class EpisodeEnd:
    """Reported with every row; meaningful where `ended` (the row is an episode's is_last).

    stats: the suite's per-episode keys (EnvSpec.episode_keys), e.g. Craftax's
    `log_achievement_<name>` int32 (1 if unlocked in the episode); {} for most suites.
    """

    ended: jax.Array  # bool
    length: jax.Array  # int32: agent steps L of the finished episode
    score: jax.Array  # float32: sum of its step rewards
    terminal: jax.Array  # bool: real termination (False for a time-limit end)
    stats: dict = struct.field(default_factory=dict)


Row = dict[str, Any]
"""obs ({name: array} or one array), reward f32, is_first / is_last / is_terminal bool."""


def _pack_obs(spec: EnvSpec, obs: dict):
    if spec.dict_obs:
        return {n: jnp.asarray(obs[n], jnp.dtype(t)) for n, _, t in spec.obs_space}
    name, _, dtype = spec.obs_space[0]
    x = jnp.asarray(obs[name], jnp.float32)
    return x / 255.0 if dtype == "uint8" else x


def _row(spec, obs, reward, is_first, is_last, is_terminal) -> Row:
    return dict(
        obs=_pack_obs(spec, obs),
        reward=jnp.asarray(reward, jnp.float32),
        is_first=jnp.asarray(is_first, bool),
        is_last=jnp.asarray(is_last, bool),
        is_terminal=jnp.asarray(is_terminal, bool),
    )


def _fixed_dtype(x) -> jax.Array:
    """An array with a fixed (not weak) dtype, so scan carries keep one type."""
    x = jnp.asarray(x)
    return jnp.array(x, dtype=x.dtype)


def to_env_action(spec: EnvSpec, action: jax.Array) -> jax.Array:
    """Agent action -> the action the suite receives.

    Discrete: the int32 index as is. Continuous: clip to [-1, 1], rescale to [low, high]
    per dim, reshaped to the env's action shape.
    """
    if spec.discrete:
        return jnp.asarray(action, jnp.int32)
    return box_action(action, spec.action_low, spec.action_high).reshape(
        spec.env_action_shape)


def box_action(action: jax.Array, low, high) -> jax.Array:
    """Continuous agent actions [..., D] in [-1, 1] -> the env's box [low, high] [D], in
    float32: clipped to [-1, 1] (the reference's ClipAction), then rescaled per dim
    (NormalizeAction), embodied/core/wrappers.py:58-91 @29eb964. The compiled envs'
    step (to_env_action) and a deployed policy of a compiled env (run/policy.py) both
    map with it."""
    a = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
    low = jnp.asarray(low, jnp.float32)
    high = jnp.asarray(high, jnp.float32)
    return (a + 1.0) / 2.0 * (high - low) + low


def from_env_action(spec: EnvSpec, env_action: jax.Array) -> jax.Array:
    """The inverse of `to_env_action` on the env's box: [low, high] -> [-1, 1]."""
    if spec.discrete:
        return jnp.asarray(env_action, jnp.int32)
    low = jnp.asarray(spec.action_low, jnp.float32)
    high = jnp.asarray(spec.action_high, jnp.float32)
    a = jnp.asarray(env_action, jnp.float32).reshape(spec.action_shape)
    return (a - low) / (high - low) * 2.0 - 1.0


@functools.cache
def _state_template(spec: EnvSpec):
    """Shapes and dtypes of the suite's env state (from tracing its reset)."""
    return jax.eval_shape(spec.reset, jax.random.PRNGKey(0))[0]


def _pack(env_state):
    """The suite's env state without its zero-size arrays (None in their place): MJX's
    Data has some (e.g. `act` without activations), and orbax cannot save them."""
    return jax.tree.map(lambda x: None if jnp.size(x) == 0 else x, env_state)


def _unpack(spec: EnvSpec, packed):
    """`_pack`'s inverse: the zero-size arrays rebuilt from the state's template."""
    def one(t, x):  # t is None where the suite's own state has a None field
        return jnp.zeros(t.shape, t.dtype) if x is None and t is not None else x
    return jax.tree.map(one, _state_template(spec), packed, is_leaf=lambda x: x is None)


def collector_init(spec: EnvSpec, key: jax.Array) -> tuple[CollectorState, Row]:
    """Reset the env and emit its first row (reset obs, reward 0, is_first)."""
    env_state, obs = spec.reset(key)
    state = CollectorState(
        env_state=_pack(jax.tree.map(_fixed_dtype, env_state)),
        is_last=jnp.asarray(False),
        length=jnp.asarray(0, jnp.int32),
        score=jnp.asarray(0.0, jnp.float32),
    )
    return state, _row(spec, obs, 0.0, True, False, False)


def collector_step(
    spec: EnvSpec, state: CollectorState, action: jax.Array, key: jax.Array
) -> tuple[CollectorState, Row, EpisodeEnd]:
    """Emit the env's next row.

    If the previous row was is_last, this is the next episode's reset row and `action` is
    ignored; otherwise the env takes `action` (int32 index or float32 [dims] in [-1, 1]).
    Both branches are computed and selected (what vmap would do with a cond anyway).
    """
    key_reset, key_step = jax.random.split(key)
    return _advance(spec, state, action, key_step, spec.reset(key_reset))


def _advance(spec: EnvSpec, state: CollectorState, action, key_step, reset_out):
    """One env's next row given its step key and a reset (used where state.is_last)."""
    reset_env_state, reset_obs = reset_out
    out = spec.step(key_step, _unpack(spec, state.env_state), to_env_action(spec, action),
                    state.length + 1)
    terminated = jnp.asarray(out.terminated, bool)
    is_last = terminated | jnp.asarray(out.truncated, bool)
    reward = jnp.asarray(out.reward, jnp.float32)

    reset = state.is_last
    pick = lambda a, b: jnp.where(reset, a, b)  # noqa: E731
    length = jnp.where(reset, 0, state.length + 1).astype(jnp.int32)
    score = jnp.where(reset, 0.0, state.score + reward).astype(jnp.float32)
    row = _row(
        spec,
        jax.tree.map(pick, reset_obs, out.obs),
        pick(0.0, reward),
        reset,
        ~reset & is_last,
        ~reset & terminated,
    )
    new_state = CollectorState(
        env_state=jax.tree.map(
            lambda a, b, old: pick(a, b).astype(old.dtype),
            _pack(reset_env_state), _pack(out.env_state), state.env_state),
        is_last=row["is_last"],
        length=length,
        score=score,
    )
    stats = {n: jnp.asarray(out.stats[n], jnp.dtype(t)) for n, t in spec.episode_keys}
    end = EpisodeEnd(ended=row["is_last"], length=length, score=score,
                     terminal=row["is_terminal"], stats=stats)
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


def box_bounds(low, high, dims: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-dim finite bounds of a continuous action box, checked (suite helpers)."""
    low = np.broadcast_to(np.asarray(low, np.float64), (dims,))
    high = np.broadcast_to(np.asarray(high, np.float64), (dims,))
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        raise ValueError(f"action bounds [{low}, {high}] must be finite with high > low: "
                         "they cannot be normalised to [-1, 1]")
    return tuple(float(x) for x in low), tuple(float(x) for x in high)
