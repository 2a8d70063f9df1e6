"""What a run is built from: its Setup (config, env spec, agent spaces, replay capacity,
whether the envs step on the host) and the state each seed carries (SeedState). One place
decides how a run steps its envs: compiled (the envs are written in JAX and step inside
the training program, loop.py) or host (they step on the CPU, host_loop.py), as the
registry says; Setup.host records it for everyone after.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo import spaces as spaces_lib
from dreamerjax.config.defaults import Config, RunConfig, replay_rows_per_env
from dreamerjax.envs.host import base as host_lib


@flax.struct.dataclass
class SeedState:
    """Everything one seed's run carries between ticks (leading seed axis when batched)."""

    agent: agent_lib.AgentState
    replay: Any  # replay_lib.ReplayState
    env: Any  # envs_lib.CollectorState, leading [num_envs]
    row: dict  # the current row of every env, [num_envs, ...]
    carry: dict  # policy carry {deter, stoch, action}, [num_envs, ...]
    key: jax.Array
    window: dict  # metric_window state of the current log interval
    bad_update: jax.Array  # int32: first update index with a non-finite loss, -1 if none
    updates: jax.Array  # int32: updates done


@dataclasses.dataclass(frozen=True)
class Setup:
    """Static description of a run: config, env spec, agent spaces, replay capacity."""

    config: Config
    spec: Any
    spaces: spaces_lib.Spaces
    capacity: int  # replay rows per env
    ticks_per_log: int
    host: bool = False  # the envs step on the host (host_loop.py), not in the program

    @property
    def run(self) -> RunConfig:
        return self.config.run

    @property
    def window_length(self) -> int:
        """Rows of one replayed sequence: batch_length + replay_context."""
        return self.run.batch_length + self.run.replay_context


def make_setup(config: Config) -> Setup:
    """The setup of a validated config (run/plan.make_plan validates, then calls this):
    the env's path, compiled or host, as the registry says (Setup.host records it), and
    the checks of the run against the env's spaces."""
    if envs_lib.parse_env_id(config.run.env)[0].compiled:
        return make_compiled_setup(config)
    return make_host_setup(config)


class EnvError(ValueError):
    """The run's env id names no env that can be built here (check_env)."""


def checked_setup(config: Config, seeds=None, whole: Config | None = None) -> Setup:
    """The first part of a run's plan (run/plan.run_setup): `config` validated once
    (config/validate.validate, with `seeds` when given; ConfigError naming the key, after
    EnvError when the env id is wrong too), then the setup built once, of `whole` (the
    whole run's config of a per-process one, plan.processes_config) when given."""
    from dreamerjax.config import validate as config_validate
    from dreamerjax.config.keys import ConfigError

    seeds = None if seeds is None else tuple(int(s) for s in seeds)
    try:
        config_validate.validate(config, seeds=seeds)
    except ConfigError:
        check_env(config)  # a wrong env id first (EnvError), then the values
        raise
    return make_setup(config if whole is None else whole)


def check_env(config: Config) -> None:
    """EnvError (one line) when the config's env id is wrong: a compiled env's spec is
    built (cheap); a host env's suite is checked for its packages, and a Gymnasium id is
    looked up by building one env and closing it. Other host suites' tasks are checked
    when the run builds its envs: building one here could download data (bsuite's MNIST)
    or print the suite's own warnings. A wrong id is the first thing to fix, so a config's
    other errors come after this check (plan.make_plan, the command line's preflight)."""
    env_id = config.run.env
    try:
        suite = envs_lib.parse_env_id(env_id)[0]
        if suite.compiled:
            envs_lib.make_env(env_id, **envs_lib.suite_options(config.env, env_id))
        else:
            host_lib.require_extra(env_id)
            if suite.name == "gym":
                env_factory(config)().close()
    except EnvError:
        raise
    except Exception as e:  # noqa: BLE001 - a suite's own error (gymnasium's NameNotFound)
        message = " ".join(str(e).split()) or type(e).__name__
        if not message.startswith("--env"):  # the host suites name it themselves
            message = f"--env {env_id!r}: {message}"
        raise EnvError(message) from e


def make_compiled_setup(config: Config) -> Setup:
    """The setup of a run whose env is written in JAX (make_setup chooses)."""
    run = config.run
    try:
        spec = envs_lib.make_env(run.env, run.episode_limit, dict_obs=True,
                                 **envs_lib.suite_options(config.env, run.env))
    except envs_lib.MissingExtra:
        raise
    except ValueError as e:  # a wrong id: the command line names the flag (EnvError)
        raise EnvError(f"--env {run.env!r}: {' '.join(str(e).split())}") from e
    spaces = envs_lib.spaces_of(spec, config.agent.enc_spaces, config.agent.dec_spaces)
    capacity = check_run(config, spaces)
    return Setup(config, spec, spaces, capacity, run.eval_every // run.num_envs)


def check_run(config: Config, spaces: spaces_lib.Spaces) -> int:
    """The checks of a run against its env's spaces, before compiling (compiled and host
    suites alike): the CNN geometry of each encoded image key. The config's own values
    (the log points, the replay against one sequence) are config/validate.validate's, which
    the run's plan (plan.make_plan) runs first. Returns the replay capacity: rows per env,
    replay.size over the envs but no more than the run fills (config.replay_rows_per_env; growing
    --steps on resume grows the ring), or an explicit run.replay_capacity."""
    from dreamerjax.algo import nets

    nets.check_image_geometry(config.agent, spaces)
    return replay_rows_per_env(config.run)


def env_settings(config: Config) -> dict[str, Any]:
    """The suite settings of the run's env from the Config's env section."""
    suite, _ = host_lib.split_env_id(config.run.env)
    return host_lib.suite_settings(
        suite, envs_lib.suite_options(config.env, config.run.env))


def env_factory(config: Config) -> host_lib.EnvFactory:
    return host_lib.EnvFactory(config.run.env, tuple(sorted(env_settings(config).items())))


def _host_spaces(spec: host_lib.HostSpec, config: Config) -> spaces_lib.Spaces:
    acfg = config.agent
    return spaces_lib.Spaces(
        spec.obs_space, spec.discrete, spec.num_actions if spec.discrete else spec.action_dims,
        enc_spaces=acfg.enc_spaces, dec_spaces=acfg.dec_spaces)


def make_host_setup(config: Config) -> Setup:
    """Build one env in this process to read its spaces (as the reference's make_agent
    does, dreamerv3/main.py:136-144) and validate the run before anything compiles."""
    run = config.run
    env = env_factory(config)()
    try:
        spec = env.spec
    finally:
        env.close()
    spaces = _host_spaces(spec, config)
    if not (run.episode_limit or spec.episode_limit):
        raise ValueError(f"--env {run.env} has no episode limit of its own: set "
                         "run.episode_limit (evaluation plays each episode to its end)")
    capacity = check_run(config, spaces)
    return Setup(config, spec, spaces, capacity, run.eval_every // run.num_envs, host=True)
