"""The host training path: environments that are not written in JAX (Gymnasium, Atari,
DMC, Crafter; dreamerjax/envs/host.py) stepped on the CPU, with the policy, the replay
insert and the updates still compiled.

    HostTrainer (a driver.Trainer whose init, chunk and evaluate step host envs;
                 report, keys, metric names and the schedule inherited)
      per tick:  jit(vmap(act_and_insert))(states, rows)   policy on the rows + replay add
                 actions -> host                            (waits for the policy only)
                 jit(train_steps)(states, owed)             the updates the schedule owes,
                                                            dispatched, not awaited
                 collector.step(actions)                    the envs step meanwhile
      -> episode ends [ticks, seeds, envs], as the compiled chunk returns them

The next tick's policy call needs the parameters after this tick's updates (as in the
compiled path, where acting uses the parameters after the previous tick's updates), so
only the env step overlaps the device work. Each seed has its own `num_envs` env
instances (seeded from the run's seed and the env's index) and its own evaluation envs.
The log points, records, checkpoints and callbacks are the compiled driver's
(dreamerjax/driver.py): HostTrainer only replaces the Trainer. Host env states are not in
checkpoints: a resumed run starts fresh episodes (the replay and agent are restored).
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.defaults import Config
from dreamerjax.data import metric_window, schema
from dreamerjax.data import replay as replay_lib
from dreamerjax.envs.host import base as host_lib
from dreamerjax.run import loop as train_lib
from dreamerjax.run.driver import EVAL_KEY_OFFSET, Trainer
from dreamerjax.run.loop import SeedState, Setup

# ----------------------------------------------------------------------------- setup


def env_settings(config: Config) -> dict[str, Any]:
    """The suite settings of the run's env from the Config's env section."""
    suite, _ = host_lib.split_env_id(config.run.env)
    return host_lib.suite_settings(
        suite, envs_lib.suite_options(getattr(config, "env", None), config.run.env))


def env_factory(config: Config) -> host_lib.EnvFactory:
    return host_lib.EnvFactory(config.run.env, tuple(sorted(env_settings(config).items())))


def spaces_of(spec: host_lib.HostSpec, config: Config) -> agent_lib.Spaces:
    acfg = config.agent
    return agent_lib.Spaces(
        spec.obs_space, spec.discrete, spec.num_actions if spec.discrete else spec.action_dims,
        enc_spaces=getattr(acfg, "enc_spaces", ".*"), dec_spaces=getattr(acfg, "dec_spaces",
                                                                          ".*"))


def make_host_setup(config: Config) -> Setup:
    """Build one env in this process to read its spaces (as the reference's make_agent
    does, dreamerv3/main.py:136-144) and validate the run before anything compiles."""
    run = config.run
    env = env_factory(config)()
    try:
        spec = env.spec
    finally:
        env.close()
    spaces = spaces_of(spec, config)
    if not (run.episode_limit or spec.episode_limit):
        raise ValueError(f"--env {run.env} has no episode limit of its own: set "
                         "run.episode_limit (evaluation plays each episode to its end)")
    capacity = train_lib.check_run(config, spaces)
    return Setup(config, spec, spaces, capacity, run.eval_every // run.num_envs)


def is_host_setup(setup: Setup) -> bool:
    return isinstance(setup.spec, host_lib.HostSpec)


def episode_limit(setup: Setup) -> int:
    return int(setup.run.episode_limit or setup.spec.episode_limit)


# ----------------------------------------------------------------------------- per seed


def init_host_seed(setup: Setup, key, names: tuple[str, ...] = ()) -> SeedState:
    """train.init_seed without env state: the agent, an empty replay, the policy carry.
    The key is split as init_seed splits it, so a seed's agent starts from the same
    parameters on both paths."""
    run, cfg = setup.run, setup.config.agent
    k_agent, _, k_run = jax.random.split(key, 3)
    agent_state = agent_lib.init(k_agent, cfg, setup.spaces)
    example = schema.zeros(schema.replay_row_spec(setup.spaces, cfg.rssm.deter,
                                                  cfg.rssm.stoch))
    replay = replay_lib.replay_init(run.num_envs, setup.capacity, example,
                                    setup.window_length)
    carry = agent_lib.policy_initial(cfg, setup.spaces, run.num_envs)
    return SeedState(agent=agent_state, replay=replay, env=(), row={}, carry=carry,
                     key=k_run, window=metric_window.init(names),
                     bad_update=jnp.full((), -1, jnp.int32), updates=jnp.zeros((), jnp.int32))


def act_and_insert(setup: Setup, s: SeedState, row: dict):
    """The policy on one seed's host rows [num_envs, ...] and their replay insert (the
    compiled act_and_store without its env step). Returns (state, actions [num_envs])."""
    key, k_pol, _ = jax.random.split(s.key, 3)  # as act_and_store (its k_env unused here)
    row = schema.conform(row, schema.env_row_spec(setup.spaces, row["is_first"].shape))
    act, carry, latent = agent_lib.policy(
        s.agent.params, setup.config.agent, setup.spaces, s.carry, row["obs"],
        row["is_first"], k_pol)
    stored = jax.vmap(envs_lib.replay_row)(row, act, latent["deter"], latent["stoch"])
    replay = replay_lib.replay_add(s.replay, stored)
    return s.replace(replay=replay, carry=carry, key=key), stored["action"]


def train_steps(setup: Setup, states: SeedState, n) -> SeedState:
    """`n` (traced) updates of every seed, as the compiled tick runs them."""
    return jax.lax.fori_loop(
        0, n, lambda _, st: train_lib.over_seeds(
            setup, lambda s: train_lib.train_once(setup, s), st), states)


def eval_act(setup: Setup, params, carry, row, key, mode: bool):
    """One evaluation policy step on host rows of one seed; returns (actions, carry)."""
    k_pol, _ = jax.random.split(key)
    row = schema.conform(row, schema.env_row_spec(setup.spaces, row["is_first"].shape))
    act, carry, _ = agent_lib.policy(params, setup.config.agent, setup.spaces, carry,
                                     row["obs"], row["is_first"], k_pol, mode)
    return act, carry


# ----------------------------------------------------------------------------- trainer


def _env_seed(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def _split_seeds(tree, seeds: int):
    """[seeds * n, ...] -> [seeds, n, ...] on every leaf."""
    return jax.tree.map(lambda x: x.reshape(seeds, -1, *x.shape[1:]), tree)


@dataclasses.dataclass
class HostTrainer(Trainer):
    """The compiled driver's Trainer for host envs: init, chunk and evaluate replaced, the
    rest (report, key derivations, metric names, schedule) inherited.

    parallel: one worker process per env (else all step in this process, the default,
    cheapest for envs such as CartPole and on a 2-core machine); timeout: seconds a
    worker may take for one command before the run stops with an error.
    """

    parallel: bool | None = None  # None: the config's run.driver_parallel if it has one
    timeout: float = 300.0
    # Seconds summed over the ticks of chunk() when a dict (dreamerjax bench --env): "act"
    # (policy dispatch until its actions are on the host, i.e. also the wait for the
    # previous tick's updates), "dispatch" (handing the updates to the device), "env" (the
    # host envs' step, overlapping those updates), "ticks".
    profile: dict | None = None

    def __post_init__(self):
        if self.devices != 1:
            raise ValueError("--devices: host environments run on one device")
        if self.parallel is None:  # the reference's run.driver_parallel (configs.yaml:73)
            self.parallel = bool(getattr(self.setup.run, "driver_parallel", False))
        super().__post_init__()  # jit is lazy: the compiled chunk and evaluate never trace
        setup = self.setup
        names = self.metric_names
        self._init_fn = jax.vmap(lambda k: init_host_seed(setup, k, names))
        self._init = jax.jit(self._init_fn)
        self._act = jax.jit(
            lambda st, rows: train_lib.over_seeds(
                setup, lambda s, r: act_and_insert(setup, s, r), st, rows),
            donate_argnums=0)
        self._train = jax.jit(lambda st, n: train_steps(setup, st, n), donate_argnums=0)
        self._eval_act = jax.jit(
            lambda p, c, r, k, mode: train_lib.over_seeds(
                setup, lambda *a: eval_act(setup, *a, mode), p, c, r, k),
            static_argnums=4)
        self._eval_carry = jax.jit(jax.vmap(
            lambda _: agent_lib.policy_initial(setup.config.agent, setup.spaces,
                                               setup.run.eval_episodes)))
        self._train_envs: host_lib.HostCollector | None = None
        self._eval_envs: host_lib.HostCollector | None = None
        self._rows: dict | None = None

    # -- envs

    def _collector(self, count: int) -> host_lib.HostCollector:
        factory = env_factory(self.setup.config)
        vec = host_lib.HostVector([factory] * count, parallel=self.parallel,
                                  timeout=self.timeout)
        col = host_lib.HostCollector(vec, time_limit=self.setup.run.episode_limit)
        weakref.finalize(self, vec.close)
        if col.spec != self.setup.spec:
            vec.close()
            raise ValueError(f"host env spaces changed: {col.spec} vs {self.setup.spec}")
        return col

    def _start_envs(self) -> None:
        """Training envs: seed s, env w gets its own instance, first reset seeded (s, w)."""
        n = self.setup.run.num_envs
        self._train_envs = self._collector(len(self.seeds) * n)
        env_seeds = [_env_seed(s, w) for s in self.seeds for w in range(n)]
        self._rows = _split_seeds(self._train_envs.reset(env_seeds), len(self.seeds))

    def close(self) -> None:
        for col in (self._train_envs, self._eval_envs):
            if col is not None:
                col.close()

    # -- the Trainer interface

    def chunk(self, states: SeedState, log_index: int):
        """One log interval of ticks. Returns (states, EpisodeEnd [ticks, seeds, envs])."""
        if self._train_envs is None:
            self._start_envs()
        t = self.setup.ticks_per_log
        owed = self.updates_due[log_index * t:(log_index + 1) * t]
        S, n = len(self.seeds), self.setup.run.num_envs
        ends = []
        prof, clock = self.profile, time.perf_counter
        for due in owed:
            t0 = clock()
            states, actions = self._act(states, self._rows)
            actions = np.asarray(actions)  # waits for the policy, not for updates
            t1 = clock()
            if due:
                states = self._train(states, np.int32(due))  # dispatched; runs meanwhile
            t2 = clock()
            rows, end = self._train_envs.step(actions.reshape(S * n, *actions.shape[2:]))
            self._rows = _split_seeds(rows, S)
            ends.append(end)
            if prof is not None:
                for k, v in (("act", t1 - t0), ("dispatch", t2 - t1), ("env", clock() - t2),
                             ("ticks", 1)):
                    prof[k] = prof.get(k, 0) + v
        stack = lambda xs: np.stack([x.reshape(S, n) for x in xs])  # noqa: E731
        out = envs_lib.EpisodeEnd(
            ended=stack([e.ended for e in ends]), length=stack([e.length for e in ends]),
            score=stack([e.score for e in ends]), terminal=stack([e.terminal for e in ends]),
            stats={k: stack([e.stats[k] for e in ends]) for k in ends[0].stats})
        return states, out

    def evaluate(self, params, log_index: int, mode: bool = False):
        """(returns, lengths) [seeds, episodes]: fresh episodes on each seed's own
        evaluation envs, the first episode of each up to the episode limit, keys as the
        compiled evaluate draws them (fold_in(PRNGKey(seed), 1e6 + log index))."""
        E, S = self.setup.run.eval_episodes, len(self.seeds)
        if self._eval_envs is None:
            self._eval_envs = self._collector(S * E)
        keys = np.stack([np.asarray(jax.random.fold_in(
            jax.random.PRNGKey(s), EVAL_KEY_OFFSET + log_index)) for s in self.seeds])
        limit = episode_limit(self.setup)
        step_keys = jax.vmap(lambda k: jax.random.split(jax.random.split(k)[1], limit))(keys)
        env_seeds = [_env_seed(s, EVAL_KEY_OFFSET + log_index, e)
                     for s in self.seeds for e in range(E)]
        rows = _split_seeds(self._eval_envs.reset(env_seeds), S)
        carry = self._eval_carry(np.zeros((S,), np.int32))
        ret = np.zeros((S * E,), np.float64)
        length = np.zeros((S * E,), np.int64)
        done = np.zeros((S * E,), bool)
        for t in range(limit):
            act, carry = self._eval_act(params, carry, rows, step_keys[:, t], mode)
            act = np.asarray(act)
            flat, _ = self._eval_envs.step(act.reshape(S * E, *act.shape[2:]))
            live = ~done
            ret += np.where(live, flat["reward"], 0.0)
            length += live
            done |= flat["is_last"]
            if done.all():
                break
            rows = _split_seeds(flat, S)
        # Unfinished episodes leave their envs mid-episode: the next evaluation resets all.
        return (ret.astype(np.float32).reshape(S, E), length.astype(np.float32).reshape(S, E))

