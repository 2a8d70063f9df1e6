"""The trainers: the compiled functions of a run, one kind per kind of environment.

Both are siblings behind one protocol (`Trainer`: init, abstract_state, chunk, evaluate,
report, close), so the driver runs either without knowing which:

    CompiledTrainer  envs in the program: jit(vmap(init_seed)), jit(run_chunk) over a log
                     interval's ticks (loop.py), jit(evaluate) (acting.py)
    HostTrainer      envs on the host: per tick jit(act_and_insert), jit(train_steps),
                     the envs step meanwhile (host_loop.py); evaluation plays host envs
                     (acting.play_host)

What they share (the schedule, metric names, seed and evaluation keys, the open-loop
report) is `_Shared`. Host env states are not in checkpoints: a resumed host run starts
fresh episodes (the replay and agent are restored).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
import sys
import time
import weakref
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax import envs as envs_lib
from dreamerjax.algo import agent as agent_lib
from dreamerjax.envs.host import base as host_lib
from dreamerjax.run import acting, host_loop, loop, streams
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.plan import Plan
from dreamerjax.run.processes import env_part, to_host
from dreamerjax.run.setup import SeedState, Setup
from dreamerjax.run.sharding import P, env_axes, state_specs, with_host_replay, without_rows


class Trainer(Protocol):
    """What the driver needs of a run's compiled functions."""

    setup: Setup
    seeds: tuple[int, ...]
    metric_names: tuple[str, ...]

    def init(self) -> SeedState: ...

    def abstract_state(self) -> SeedState: ...

    def chunk(self, states: SeedState, log_index: int): ...

    def evaluate(self, params, log_index: int, mode: bool = False): ...

    def report(self, states: SeedState, log_index: int) -> dict: ...

    def close(self) -> None: ...


def _openl_of_seed(setup: Setup, states: SeedState, key) -> dict:
    """report.openl on a batch sampled from the first seed's replay (a host replay's rows
    are read from the first seed's own, not sliced out whole)."""
    from dreamerjax.data import replay as replay_lib
    from dreamerjax.viz import report

    if states.replay.memory == "host":
        first = jax.tree.map(lambda x: x[0], without_rows(states))
        first = first.replace(replay=first.replay.replace(data=states.replay.data))
        _, batch, _ = replay_lib.replay_sample(first.replay, key, setup.run.batch_size,
                                               setup.window_length, seed=0)
    else:
        first = jax.tree.map(lambda x: x[0], states)
        _, batch, _ = replay_lib.replay_sample(first.replay, key, setup.run.batch_size,
                                               setup.window_length)
    return report.openl(first.agent.params, setup.config.agent, setup.spaces, batch)

@dataclasses.dataclass
class _Shared:
    """What both trainers build the same way from the plan: the schedule, the metric
    names, the seed and evaluation keys, the state's specs and sharding over the plan's
    mesh, the init program and the open-loop report of the first seed. Each trainer adds
    only how it acts: `_build` (its programs). A seed's state is loop.init_seed's on both
    (the host path's without env state)."""

    plan: Plan
    # Programs compiled ahead of their first call in a run over several processes, by
    # name (_aligned).
    _ahead: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        plan = self.plan
        self.setup = setup = plan.setup
        self.seeds, self.devices, self.mesh = plan.seeds, plan.devices, plan.mesh
        self.metric_names = names = loop.metric_names(setup)
        self.updates_due = loop.updates_per_tick(setup)
        self._report = jax.jit(lambda st, k: _openl_of_seed(setup, st, k))
        self._init_fn = jax.vmap(lambda k: loop.init_seed(setup, k, names))
        self.specs = None
        if plan.data > 1:
            self.specs = state_specs(jax.eval_shape(self._init_fn, self._keys()), True,
                                     plan.fsdp)
        self.host_replay = setup.run.replay_memory == "host"
        self.sharding = (self.state_sharding()
                         if self.mesh is not None or self.host_replay else None)
        if self.host_replay:  # the rows are made on the host (init), never on the device
            self._init = jax.jit(lambda k: without_rows(self._init_fn(k)),
                                 out_shardings=without_rows(self.sharding))
        else:
            self._init = jax.jit(self._init_fn, out_shardings=self.sharding)
        self._build()

    def _build(self) -> None:
        raise NotImplementedError

    def _keys(self) -> np.ndarray:
        """[seeds, 2] the train stream's keys (run/streams.py), init_seed's root."""
        return streams.keys(self.seeds, "train")

    def owed(self, log_index: int) -> np.ndarray:
        """Updates owed after each tick of a log interval [ticks_per_log]."""
        t = self.setup.ticks_per_log
        return np.asarray(self.updates_due[log_index * t:(log_index + 1) * t])

    def state_sharding(self):
        """Where the run's state lives: the seed axis over the devices (with data-parallel
        seeds a sharding per leaf: the envs' axis also over a seed's data devices), or the
        one device.

        The state is placed there explicitly, fresh or restored from a checkpoint: a
        computation's inputs that are placed lower to a program annotated with their
        sharding, unplaced ones to another, so a fresh and a resumed run would compile two
        programs (and a resume could not load its chunk from the compilation cache).
        With run.replay_memory host the replay's rows are in pinned host memory
        (with_host_replay)."""
        if self.mesh is None:
            sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        elif self.specs is None:
            sharding = jax.sharding.NamedSharding(self.mesh, P("seed"))
        else:
            sharding = jax.tree.map(lambda sp: jax.sharding.NamedSharding(self.mesh, sp),
                                    self.specs)
        if self.setup.run.replay_memory == "host":
            return with_host_replay(sharding, jax.eval_shape(self._init_fn, self._keys()))
        return sharding

    def init(self) -> SeedState:
        if self.host_replay:
            return self._init_on_host()
        return jax.device_put(self._init(self._keys()), self.state_sharding())

    def _init_on_host(self) -> SeedState:
        """A fresh state whose replay rows (zeros) are made in host memory shard by shard:
        the rest computed as init computes it, the rows never on the device."""
        shapes = jax.eval_shape(self._init_fn, self._keys())
        sharding = self.state_sharding()
        rows = jax.tree.map(
            lambda s, sh: jax.make_array_from_callback(
                s.shape, sh, lambda _, s=s, sh=sh: np.zeros(sh.shard_shape(s.shape), s.dtype)),
            shapes.replay.data, sharding.replay.data)
        states = jax.device_put(self._init(self._keys()), without_rows(sharding))
        return states.replace(replay=states.replay.replace(data=rows))

    def abstract_state(self) -> SeedState:
        """The state's shapes, dtypes and shardings (state_sharding), without computing it:
        the restore target."""
        shapes = jax.eval_shape(self._init_fn, self._keys())
        sharding = self.state_sharding()
        if isinstance(sharding, jax.sharding.Sharding):
            sharding = jax.tree.map(lambda _: sharding, shapes)
        return jax.tree.map(
            lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes,
            sharding)

    def report(self, states: SeedState, log_index: int) -> dict:
        """The open-loop report (report.openl) of the first seed, from its replay."""
        key = streams.key(self.seeds[0], "report", log_index)
        # Slicing out the first seed may move it (a collective), as may gathering its
        # parameters' slices under FSDP.
        return to_host(self._aligned("report", self._report, states, key))

    def _aligned(self, name: str, program, *args, static: tuple = ()):
        """program(*args, *static) (a jitted program; static: its trailing static
        arguments). In a run over several processes it is compiled ahead of its first
        call (_ahead_of_time) and started once every process has reached a barrier: a new
        collective waits only 30 s for every process (distributed.py), and one still
        compiling would fail the run."""
        if jax.process_count() <= 1:
            return program(*args, *static)
        from dreamerjax.run import distributed

        compiled = self._ahead_of_time(name, program, *args, static=static)
        distributed.barrier(name)
        return compiled(*args)

    def _ahead_of_time(self, name: str, program, *args, static: tuple = ()):
        """program compiled for these arguments, once per name."""
        if name not in self._ahead:
            self._ahead[name] = program.lower(*args, *static).compile()
        return self._ahead[name]

    def use_executables(self, executables: dict) -> None:
        """Call these executables in place of the jitted programs they were compiled
        from (precompile.compile_here): by PROGRAMS' names, each a (jax.stages.Compiled,
        the trailing static arguments it was compiled for) pair. The trainer's calls then
        trace, lower and compile nothing (AheadOfTime)."""
        for name, (compiled, static) in executables.items():
            attr = PROGRAMS[name]
            setattr(self, attr, AheadOfTime(name, getattr(self, attr), compiled, static))

    def close(self) -> None:
        pass


# The attribute of each program a run compiles ahead (precompile._programs), by its name.
PROGRAMS = {"chunk": "_chunk", "init": "_init", "eval": "_eval", "report": "_report"}


class AheadOfTime:
    """A jitted program together with its executable compiled ahead for the arguments the
    run will pass it (their shapes, dtypes and shardings): a call with those arguments runs
    the executable itself, so nothing is traced or compiled again (JAX's in-memory caches
    are keyed on more than the program, and a persistent-cache lookup would trace first).
    A call with other static arguments, or whose arguments the executable refuses (JAX
    checks them before it runs anything, so nothing donated is lost), goes to the jitted
    program, which compiles as it would have without this; the refusal is said once on
    stderr. Anything else (lower, trace) is the jitted program's."""

    def __init__(self, name: str, jitted, compiled, static: tuple = ()) -> None:
        self.name, self.jitted, self.compiled, self.static = name, jitted, compiled, static

    def __call__(self, *args):
        cut = len(args) - len(self.static)
        if self.compiled is not None and args[cut:] == self.static:
            try:
                return self.compiled(*args[:cut])
            except (TypeError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                print(f"dreamerjax: warning: the {self.name} program compiled ahead does not "
                      f"take this call's arguments ({first}); compiling it for them",
                      file=sys.stderr)
                self.compiled = None
        return self.jitted(*args)

    def __getattr__(self, name: str):
        return getattr(self.jitted, name)


@dataclasses.dataclass
class CompiledTrainer(_Shared):
    """The compiled functions of a run whose envs are written in JAX: the envs step
    inside the chunk."""

    def _build(self) -> None:
        setup = self.setup
        self._chunk = self._chunk_program(setup)
        self._eval = jax.jit(self._eval_fn, static_argnums=2)
        # run.seed_loop threads: the chunk is the 1-seed program, run once per seed on host
        # threads; the seeds' states are split before and joined after (two small programs).
        seeds = len(self.seeds)
        threads = self.plan.seed_loop == "threads" and seeds > 1
        self.threads = min(seeds, os.cpu_count() or 1) if threads else 0
        # Under run.replay_memory host these keep the rows in host memory (XLA:CPU, the
        # only backend that runs threads, computes on them there).
        host = self.host_replay
        self._split = jax.jit(
            lambda st: [jax.tree.map(lambda a, i=i: a[i:i + 1], st) for i in range(seeds)],
            **({"out_shardings": [self.sharding] * seeds} if host else {}))
        self._join = jax.jit(lambda outs: (
            jax.tree.map(lambda *a: jnp.concatenate(a), *[o[0] for o in outs]),
            jax.tree.map(lambda *a: jnp.concatenate(a, 1), *[o[1] for o in outs])),
            **({"out_shardings": (self.sharding, None)} if host else {}))

    def _chunk_program(self, setup: Setup):
        """jit(run_chunk) over a log interval, its state donated. Seeds over devices: the
        seed axis of the state (and of the episode ends [ticks, seeds, envs]) pinned to the
        mesh, so every device keeps its own seeds through the whole chunk. Data-parallel
        seeds: run_chunk runs per device (shard_map) on its envs, replay and part of each
        batch, and the update averages the gradients over the data axis."""
        chunk = functools.partial(loop.run_chunk, setup)  # (states, due) -> (states, ends)
        if self.host_replay:
            return self._host_replay_chunk(chunk)
        if self.mesh is None:
            return jax.jit(chunk, donate_argnums=0)
        if self.specs is None:
            due_sh = jax.sharding.NamedSharding(self.mesh, P())  # replicated
            ends_sh = jax.sharding.NamedSharding(self.mesh, P(None, "seed"))
            return jax.jit(chunk, donate_argnums=0, in_shardings=(self.sharding, due_sh),
                           out_shardings=(self.sharding, ends_sh))
        # check_vma off: the state's agent, key and counters are the same on every data
        # device (the averaged gradients make them so), which JAX cannot prove.
        ends = P(None, "seed", env_axes(self.plan.fsdp))
        mapped = jax.shard_map(chunk, mesh=self.mesh, in_specs=(self.specs, P()),
                               out_specs=(self.specs, ends), check_vma=False)
        return jax.jit(mapped, donate_argnums=0)

    def _host_replay_chunk(self, chunk):
        """The chunk of a run whose replay rows are in host memory: the state's shardings
        given in and out (the rows stay on the host); seeds over devices run per device
        (shard_map over 'seed'), so each moves rows of its own seeds only."""
        if self.mesh is not None:
            specs, ends = P("seed"), P(None, "seed")
            if self.specs is not None:
                specs, ends = self.specs, P(None, "seed", env_axes(self.plan.fsdp))
            chunk = jax.shard_map(chunk, mesh=self.mesh, in_specs=(specs, P()),
                                  out_specs=(specs, ends), check_vma=False)
        return jax.jit(chunk, donate_argnums=0, in_shardings=(self.sharding, None),
                       out_shardings=(self.sharding, None))

    def chunk_input(self, states: SeedState) -> SeedState:
        """The state one chunk program takes (abstract): every seed's, or under run.seed_loop
        threads one seed's."""
        if not self.threads:
            return states
        return jax.tree.map(
            lambda s: jax.ShapeDtypeStruct((1, *s.shape[1:]), s.dtype, sharding=s.sharding),
            states)

    def _eval_fn(self, params, keys, mode: bool):
        """Evaluation of every seed: [seeds, episodes] returns and lengths. Each device
        runs its own seeds' while_loop (shard_map): under plain jit the loop's condition
        would be reduced over the sharded seed axis, a collective that also makes every
        device play until the slowest seed's episodes end. Only the policy's parameters
        enter it (agent.policy_params): under FSDP only their slices are gathered, once
        per evaluation."""
        setup, eps = self.setup, self.setup.run.eval_episodes
        params = agent_lib.policy_params(setup.config.agent, params)
        if self.mesh is None:
            return loop.over_seeds(
                setup, lambda p, k: acting.evaluate(setup, p, k, eps, mode), params, keys)
        fn = jax.vmap(lambda p, k: acting.evaluate(setup, p, k, eps, mode))
        spec = P("seed")
        # check_vma off: the loop's carry starts from constants (device-invariant) and
        # becomes per-device, which the varying-axes check refuses for loops. A seed's data
        # devices play its evaluation episodes alike (the same params and keys).
        return jax.shard_map(fn, mesh=self.mesh, in_specs=(spec, spec),
                             out_specs=spec, check_vma=False)(params, keys)

    def chunk(self, states: SeedState, log_index: int):
        due = self.owed(log_index)
        if self.specs is not None and jax.process_count() > 1:
            return self._chunk_in_step(states, due)
        if not self.threads:
            return self._chunk(states, due)

        def one_seed(state):  # waits here: the threads' programs then overlap on the cores
            return jax.block_until_ready(self._chunk(state, due))

        with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
            outs = list(pool.map(one_seed, self._split(states)))
        return self._join(outs)

    def evaluate(self, params, log_index: int, mode: bool = False, stream: str = "eval"):
        """(returns, lengths) [seeds, episodes] with the keys of `stream` (run/streams.py)
        at index `log_index`: a log point's evaluation, or `dreamerjax eval`'s. Over
        several processes compiled ahead and started at a barrier (_aligned): under FSDP
        its parameters' slices are gathered across the processes."""
        keys = streams.keys(self.seeds, stream, log_index)
        return self._aligned(f"eval_{mode}", self._eval, params, keys, static=(mode,))

    def _chunk_in_step(self, states: SeedState, due):
        """The chunk of a data-parallel run over several processes: its gradients are
        averaged across them inside the program, so every process compiles it first and
        the processes line up at a barrier before each chunk starts (_aligned)."""
        return self._aligned("chunk", self._chunk, states, due)


@dataclasses.dataclass
class HostTrainer(_Shared):
    """The compiled functions of a run whose envs step on the host (host_loop.py).

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

    def _build(self) -> None:
        if self.parallel is None:  # the reference's run.driver_parallel (configs.yaml:73)
            self.parallel = self.setup.run.driver_parallel
        setup, fsdp = self.setup, self.plan.fsdp

        def act(st, rows):
            return loop.over_seeds(
                setup, lambda s, r: host_loop.act_and_insert(setup, s, r), st, rows)

        def train(st, n):
            return host_loop.train_steps(setup, st, n)

        if self.specs is not None:
            # Data-parallel seeds: each data device acts on its envs' rows (the host's rows
            # [seeds, envs, ...] put on the devices by that split, as the reference's
            # device_put(data, train_sharded)) and trains on its part of each batch.
            envs = P("seed", env_axes(fsdp))
            act = jax.shard_map(act, mesh=self.mesh, in_specs=(self.specs, envs),
                                out_specs=(self.specs, envs), check_vma=False)
            train = jax.shard_map(train, mesh=self.mesh, in_specs=(self.specs, P()),
                                  out_specs=self.specs, check_vma=False)
        def compiled(fn, state_out):
            """fn jitted, donating the state; with run.replay_memory host the state keeps
            its shardings in and out, so the replay's rows stay in host memory."""
            if not self.host_replay:
                return jax.jit(fn, donate_argnums=0)
            return jax.jit(fn, donate_argnums=0, in_shardings=(self.sharding, None),
                           out_shardings=state_out(self.sharding))

        self._act = compiled(act, lambda state: (state, None))  # (state, actions)
        self._train = compiled(train, lambda state: state)
        self._eval_act = {mode: host_loop.eval_program(setup, mode) for mode in (False, True)}
        self._train_envs: host_lib.HostCollector | None = None
        self._eval_envs: host_lib.HostCollector | None = None
        self._rows: dict | None = None  # this process's envs' rows [k, ...]
        # Over several processes: each steps only the envs on its devices (EnvPart), and
        # act and train are compiled ahead of time (_line_up).
        self.part = env_part(self.mesh, fsdp, len(self.seeds), setup.run.num_envs)

    # -- envs

    def _collector(self, count: int) -> host_lib.HostCollector:
        factory = setup_lib.env_factory(self.setup.config)
        vec = host_lib.HostVector([factory] * count, parallel=self.parallel,
                                  timeout=self.timeout)
        col = host_lib.HostCollector(vec, time_limit=self.setup.run.episode_limit)
        weakref.finalize(self, vec.close)
        if col.spec != self.setup.spec:
            vec.close()
            raise ValueError(f"host env spaces changed: {col.spec} vs {self.setup.spec}")
        return col

    def _start_envs(self) -> None:
        """Training envs: seed s, env w gets its own instance, first reset seeded (s, w);
        over several processes only this process's envs (EnvPart)."""
        part = self.part
        self._train_envs = self._collector(len(part.seed_index))
        env_seeds = [host_loop.env_seed(self.seeds[s], w)
                     for s, w in zip(part.seed_index, part.env_index, strict=True)]
        self._rows = self._train_envs.reset(env_seeds)

    def _line_up(self, states: SeedState, rows) -> tuple:
        """(act, train) of a run over several processes: compiled ahead of time by every
        process (the update's gradient mean is a collective that waits only 30 s for all
        processes to arrive), then the processes meet at a barrier before each chunk."""
        from dreamerjax.run import distributed

        steps = (self._ahead_of_time("act", self._act, states, rows),
                 self._ahead_of_time("train", self._train, states, np.int32(1)))
        distributed.barrier("host_chunk")
        return steps

    def close(self) -> None:
        for col in (self._train_envs, self._eval_envs):
            if col is not None:
                col.close()

    # -- the Trainer interface

    def chunk(self, states: SeedState, log_index: int):
        """One log interval of ticks. Returns (states, EpisodeEnd [ticks, seeds, envs])."""
        if self._train_envs is None:
            self._start_envs()
        owed = self.owed(log_index)
        part, act, train = self.part, self._act, self._train
        if part.sharding is not None:
            act, train = self._line_up(states, part.to_devices(self._rows))
        ends = []
        prof, clock = self.profile, time.perf_counter
        for due in owed:
            t0 = clock()
            states, actions = act(states, part.to_devices(self._rows))
            actions = part.to_host(actions)  # waits for the policy, not for updates
            t1 = clock()
            if due:
                states = train(states, np.int32(due))  # dispatched; runs meanwhile
            t2 = clock()
            self._rows, end = self._train_envs.step(actions)
            ends.append(end)
            if prof is not None:
                for k, v in (("act", t1 - t0), ("dispatch", t2 - t1), ("env", clock() - t2),
                             ("ticks", 1)):
                    prof[k] = prof.get(k, 0) + v
        # [ticks, seeds, envs]: over several processes an array over the devices, which
        # the log point gathers (to_host) as it gathers the compiled trainer's
        stack = lambda xs: np.stack(xs)  # noqa: E731
        out = envs_lib.EpisodeEnd(
            ended=stack([e.ended for e in ends]), length=stack([e.length for e in ends]),
            score=stack([e.score for e in ends]), terminal=stack([e.terminal for e in ends]),
            stats={k: stack([e.stats[k] for e in ends]) for k in ends[0].stats})
        return states, part.to_devices(out, lead=1)

    def evaluate(self, params, log_index: int, mode: bool = False, stream: str = "eval"):
        """(returns, lengths) [seeds, episodes]: fresh episodes on each seed's own
        evaluation envs, the first episode of each up to the episode limit, keys as the
        compiled evaluate draws them (the stream's, run/streams.py), the envs' resets
        seeded from the same integers."""
        E, S = self.setup.run.eval_episodes, len(self.seeds)
        if jax.process_count() > 1:  # every process plays every seed's evaluation alike
            params = jax.device_put(to_host(params), jax.local_devices()[0])
        if self._eval_envs is None:
            self._eval_envs = self._collector(S * E)
        step_keys, env_seeds = host_loop.eval_inputs(self.setup, self.seeds, stream,
                                                     log_index)
        ret, length = acting.play_host(self.setup, self._eval_envs, self._eval_act[mode],
                                       params, env_seeds, step_keys)
        return ret.reshape(S, E), length.reshape(S, E)


def make_trainer(plan: Plan) -> Trainer:
    """The trainer of a plan: host envs (gym_, atari_, dmc_, crafter_) get a HostTrainer,
    which steps them on the CPU between compiled calls; every other suite a CompiledTrainer."""
    return HostTrainer(plan) if plan.host else CompiledTrainer(plan)
