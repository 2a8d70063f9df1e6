"""A user's own environment under a name: `dreamerjax.register_env`.

Two kinds, by what is given:

- **Gymnasium** (stepped on the host beside the compiled updates): a Gymnasium env id
  (`"CartPole-v1"`, `"my_pkg:MyEnv-v0"`), an env class or a factory function. The id to
  train on is `gym_NAME`.
- **JAX** (compiled into the training program): an object (or a class) that follows
  `JaxEnv` below. NAME is the id to train on, `SUITE_TASK` (e.g. `corridor_walk`); several
  tasks of one suite are registered one by one.

Registering a name again replaces what it named (a notebook cell run twice); a built-in
suite cannot be replaced. Registrations live in the process that made them. A run records
the module that called register_env, and a fresh process that reads the run (the command
line's `dreamerjax eval`, `load_config`) imports it again; an env registered in a script
or a notebook (`__main__`) needs the module named instead (`dreamerjax eval RUN --import
my_envs`).
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from dreamerjax.envs import core, registry


@runtime_checkable
class JaxEnv(Protocol):
    """One environment written in JAX, as `register_env` takes it. Both functions are
    pure and handle one env; the loop vmaps them over envs and seeds and compiles them.

        obs_space: {name: (shape, dtype)}, e.g. {"vector": ((4,), "float32")}; float32
            vectors [D] and uint8 images [H, W, C].
        num_actions: the number of discrete actions (an int32 index is passed to step),
            or 0 for continuous actions, whose per-dimension bounds are then the
            attributes `action_low` and `action_high` (the agent acts in [-1, 1], mapped
            onto them).
        episode_limit: agent steps after which an episode is cut as a time limit
            (truncation, not termination); evaluation runs at most this many.
        reset(key) -> (state, obs): obs {name: array} as obs_space says.
        step(key, state, action) -> (state, obs, reward, terminated): reward a float32
            scalar, terminated a bool scalar (the episode really ended).
    """

    obs_space: Mapping[str, tuple[Sequence[int], str]]
    num_actions: int
    episode_limit: int

    def reset(self, key: Any) -> tuple[Any, Mapping[str, Any]]: ...

    def step(self, key: Any, state: Any, action: Any) -> tuple[Any, Mapping[str, Any], Any,
                                                                 Any]: ...


def is_jax_env(env: Any) -> bool:
    """Whether `env` (an object or a class) follows JaxEnv rather than Gymnasium's API."""
    return (hasattr(env, "obs_space") and callable(getattr(env, "reset", None))
            and callable(getattr(env, "step", None)) and not _is_gymnasium_env(env))


def _is_gymnasium_env(env: Any) -> bool:
    try:
        import gymnasium
    except ImportError:
        return False
    return isinstance(env, gymnasium.Env) or (isinstance(env, type)
                                               and issubclass(env, gymnasium.Env))


def jax_env_spec(env: JaxEnv, env_id: str, suite: str, task: str,
                 episode_limit: int = 0) -> core.EnvSpec:
    """The EnvSpec of a JaxEnv; ValueError naming the attribute that is missing or bad.
    episode_limit > 0 replaces the env's own (`run.episode_limit`)."""
    for attr in ("obs_space", "num_actions", "episode_limit"):
        if not hasattr(env, attr):
            raise ValueError(f"{env_id}: the env has no {attr!r} (dreamerjax.JaxEnv)")
    limit = int(episode_limit or env.episode_limit)
    if limit <= 0:
        raise ValueError(f"{env_id}: episode_limit must be positive, got {limit}")
    num_actions = int(env.num_actions)
    discrete = num_actions > 0
    low = tuple(float(x) for x in getattr(env, "action_low", ()))
    high = tuple(float(x) for x in getattr(env, "action_high", ()))
    if not discrete and (not low or len(low) != len(high)):
        raise ValueError(f"{env_id}: num_actions is 0 (continuous), so give action_low and "
                         "action_high of equal length")
    obs_space = tuple((str(name), tuple(int(n) for n in shape), str(dtype))
                      for name, (shape, dtype) in dict(env.obs_space).items())
    if not obs_space:
        raise ValueError(f"{env_id}: obs_space is empty")

    import jax.numpy as jnp

    def reset(key):
        state, obs = env.reset(key)
        return state, dict(obs)

    def step(key, state, action, length):
        state, obs, reward, terminated = env.step(key, state, action)
        return core.Step(env_state=state, obs=dict(obs),
                         reward=jnp.asarray(reward, jnp.float32),
                         terminated=jnp.asarray(terminated, bool),
                         truncated=jnp.asarray(length >= limit), stats={})

    return core.EnvSpec(env_id=env_id, suite=suite, task=task, obs_space=obs_space,
                        discrete=discrete, num_actions=num_actions if discrete else 0,
                        action_dims=0 if discrete else len(low),
                        action_low=() if discrete else low,
                        action_high=() if discrete else high, episode_limit=limit,
                        reset=reset, step=step, dict_obs=len(obs_space) > 1, env=env,
                        env_action_shape=() if discrete else (len(low),))


@dataclasses.dataclass(frozen=True)
class RegisteredSuite(registry.Suite):
    """A suite of JaxEnvs registered by name: task -> the env (or its class, built with
    the run's `env.<suite>` options)."""

    tasks: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False,
                                                 repr=False)

    def load(self, env_id: str = "") -> types.SimpleNamespace:
        return types.SimpleNamespace(make=self.make)

    def make(self, task: str, episode_limit: int = 0, **options) -> core.EnvSpec:
        if task not in self.tasks:
            raise ValueError(f"unknown {self.name} task {task!r}; registered: "
                             f"{', '.join(sorted(self.tasks))}")
        env = self.tasks[task]
        if isinstance(env, type):
            env = env(**options)
        return jax_env_spec(env, f"{self.name}_{task}", self.name, task, episode_limit)


def register_env(name: str, env: str | Callable[..., Any] | JaxEnv, **kwargs) -> str:
    """Register an environment under `name` and return the env id to train on.

    Gymnasium (host): `env` is a Gymnasium env id, an env class or a factory function;
    `name` is the Gymnasium id to register (kwargs go to gymnasium.register, e.g.
    max_episode_steps=100); returns `gym_NAME`.

        register_env("Corridor-v0", Corridor, max_episode_steps=100)  # -> "gym_Corridor-v0"
        register_env("LongCartPole-v1", "CartPole-v1", max_episode_steps=1000)

    JAX (compiled): `env` follows JaxEnv (an instance, or a class built with the run's
    `env.<suite>` options); `name` is `SUITE_TASK` and is returned.

        register_env("corridor_walk", Corridor())                     # -> "corridor_walk"

    Registering a name again replaces it; a built-in suite's name is refused.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_env: name must be a non-empty string, got {name!r}")
    caller = sys._getframe(1).f_globals.get("__name__", "")  # whose import registers it
    if is_jax_env(env):
        if kwargs:
            raise TypeError(f"register_env({name!r}): a JAX env takes no options "
                            f"({', '.join(kwargs)})")
        env_id = _register_jax(name, env)
    elif isinstance(env, str) or callable(env):
        env_id = _register_gymnasium(name, env, **kwargs)
    else:
        raise TypeError(f"register_env({name!r}): env must be a Gymnasium id, class or "
                        f"factory, or a JAX env with obs_space, num_actions, episode_limit, "
                        f"reset and step (dreamerjax.JaxEnv); got {type(env).__name__}")
    registry.REGISTERED_BY[env_id] = caller
    return env_id


def _register_jax(env_id: str, env: Any) -> str:
    if "_" not in env_id:
        raise ValueError(f"register_env: a JAX env's name is SUITE_TASK (e.g. "
                         f"{env_id.lower()}_default), got {env_id!r}")
    suite, task = env_id.split("_", 1)
    if not task:
        raise ValueError(f"register_env: no task after the suite prefix in {env_id!r}")
    current = registry.SUITES.get(suite)
    if current is not None and not isinstance(current, RegisteredSuite):
        raise ValueError(f"register_env: {suite!r} is a built-in suite; choose another "
                         "prefix")
    # Checked now (a bad attribute is named here, not at the first compile).
    jax_env_spec(env() if isinstance(env, type) else env, env_id, suite, task)
    tasks = {**(current.tasks if current is not None else {}), task: env}
    caller = getattr(env, "__module__", None) or type(env).__module__
    registry.SUITES[suite] = RegisteredSuite(
        suite, caller, requires=("jax",), about=f"registered from {caller}",
        example=env_id, tasks=tasks)
    core.make_env.cache_clear()  # a replaced env must not be served from the cache
    return env_id


def _register_gymnasium(gym_id: str, env: str | Callable[..., Any], **kwargs) -> str:
    try:
        import gymnasium
    except ImportError:
        raise registry.MissingExtra(
            f"register_env({gym_id!r}): a Gymnasium env needs gymnasium (not installed): "
            f"{registry.install_command('gym')}") from None
    from gymnasium.envs.registration import registry as gym_registry

    if isinstance(env, str):
        if env == gym_id and not kwargs:
            gymnasium.spec(gym_id)  # an unknown id raises here, naming it
            return f"gym_{gym_id}"
        base = env
        kwargs.setdefault("max_episode_steps", gymnasium.spec(base).max_episode_steps)

        def entry_point(**options):
            return gymnasium.make(base, **options).unwrapped

        env = entry_point
    gym_registry.pop(gym_id, None)  # registering again replaces, without a warning
    gymnasium.register(id=gym_id, entry_point=env, **kwargs)
    return f"gym_{gym_id}"
