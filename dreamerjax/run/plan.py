"""The plan of a run: everything decided about it before anything compiles, built once.

    make_plan(config, seeds, devices)
      -> run_setup(config, seeds)
           -> config/validate.validate(config, seeds)    the one check of the values
           -> processes_config(config, processes)        the whole run of a per-process
                                                         config (e3f0224 over processes)
           -> setup.make_setup(...)                      the env's spaces (the env built
                                                         once), the replay's capacity
      -> transfer.check                             run.from_checkpoint's source (Plan.source)
      -> check_devices, memory.check_replay         the devices; the replay's and agents' bytes
      -> Plan: the seed strategy and the mesh

One plan per entry point: the command line's preflight (train), driver.train of a Config,
`dreamerjax eval` (run/rundir.py), `dreamerjax bench` (for_seeds: its other seed counts
from the first's plan) and the precompile child (from the parent's child_spec) make one;
the trainers, transfer.load_into and the precompile child's compile take it and check
nothing again. `dreamerjax info` and load_policy / `dreamerjax export`, which neither
allocate a run's state nor use its devices, take its first part (run_setup, which is
setup.checked_setup of the whole run): the config validated once, its setup built once.
"""

from __future__ import annotations

import dataclasses

import jax

from dreamerjax.config.defaults import HEAD_REF, Config, data_devices, fsdp_devices
from dreamerjax.run import loop, memory, sharding, streams, transfer
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.setup import Setup


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """A run as decided before it starts.

    config: the validated config as given (what config.json holds).
    setup: the run's Setup (env spec, spaces, replay capacity, host or compiled) with
        run.seed_loop resolved to `seed_loop`; at e3f0224 over P > 1 processes its config
        is the whole run's (processes_config), P times the given one's envs, batch, train
        devices and rows.
    seeds: the run's seeds; devices: --devices (groups of seeds); data, fsdp: a seed's
        data devices and the FSDP part of them over all processes (jax.train_devices,
        jax.train_mesh).
    seed_loop: how the seeds share a program: "vmap", "map" or "threads" (run.seed_loop
        resolved for the backend; seeds over several devices are vmapped on each).
    mesh: the run's devices as a mesh (sharding.run_mesh), None for one device.
    replay_bytes: the replay of every seed, checked against the memory free for it.
    source: run.from_checkpoint's source checked (transfer.check; None when the key is
        empty), which transfer.load_into loads into a fresh run.
    """

    config: Config
    setup: Setup
    seeds: tuple[int, ...]
    devices: int
    data: int
    fsdp: int
    seed_loop: str
    mesh: jax.sharding.Mesh | None
    replay_bytes: int
    source: transfer.Source | None = None

    @property
    def host(self) -> bool:
        """Whether the envs step on the host (Setup.host, decided by the registry)."""
        return self.setup.host


def make_plan(config: Config, seeds, devices: int = 1) -> Plan:
    """The plan of a run of `config` with `seeds` over `devices` groups of seeds: the
    config validated (ConfigError naming the key, after EnvError when its env id is
    wrong too), the setup built (each env once), run.from_checkpoint's source checked, the
    devices and the replay's memory checked (ValueError naming the flag, MemoryError),
    before anything compiles or a directory changes."""
    setup = run_setup(config, seeds)
    source = transfer.check(setup.config, setup.spaces)  # run.from_checkpoint's agent
    return _decide(setup, seeds, devices, config, source)


def run_setup(config: Config, seeds=None) -> Setup:
    """The first part of a run's plan: `config` validated once (with `seeds` when given;
    ConfigError naming the key, after EnvError when the env id is wrong too) and its setup
    built once, of the whole run over this run's processes (processes_config)."""
    return setup_lib.checked_setup(config, seeds,
                                   processes_config(config, jax.process_count()))


def for_seeds(plan: Plan, seeds, devices: int | None = None) -> Plan:
    """The plan of the same run with other seeds (and groups of them; None: the plan's):
    its config, setup and source as they are, the devices, replay memory, seed strategy
    and mesh decided again for them (`dreamerjax bench`'s seed counts)."""
    setup = loop.with_run(plan.setup, seed_loop=plan.config.run.seed_loop)
    return _decide(setup, seeds, plan.devices if devices is None else devices, plan.config,
                   plan.source)


# The run.* fields that count rows of all envs together (run.steps, run.eval_every_rows,
# replay.size, run.train_fill, run.expl_until): HEAD counts them per process.
ROW_FIELDS = ("steps", "eval_every", "replay_size", "train_fill", "expl_until")


def per_process(config: Config, processes: int) -> bool:
    """Whether a run of `processes` processes reads its config per process, as HEAD does:
    each process trains on its own jax.train_devices (indices of its own devices,
    embodied/jax/agent.py:80-84 @e3f0224) with its own envs, replay and step count
    (embodied/run/train.py @e3f0224), the batch of the update batch_size x processes
    (agent.py:199-213, 411-412 @e3f0224). 29eb964 has no multi-process runs: there the
    config is the whole run's, its devices counted over all processes (docs/scaling.md)."""
    return processes > 1 and config.agent.reference == HEAD_REF


def processes_config(config: Config, processes: int) -> Config:
    """The whole run's config of `processes` processes (per_process): num_envs,
    batch_size, the train devices and the row-counted fields (ROW_FIELDS) times the
    processes, so that each data device keeps HEAD's envs, replay ring and part of the
    batch, and the train ratio's updates per tick and the replay gate are HEAD's. The
    config itself as given otherwise."""
    if not per_process(config, processes):
        return config
    run = config.run
    changes = {k: getattr(run, k) * processes for k in ROW_FIELDS}
    changes.update(num_envs=run.num_envs * processes, batch_size=run.batch_size * processes,
                   train_devices=tuple(range(len(run.train_devices) * processes)))
    return dataclasses.replace(config, run=dataclasses.replace(run, **changes))


def plan_of_setup(setup: Setup, seeds, devices: int = 1, config: Config | None = None) -> Plan:
    """The plan of a run whose setup is built (from a validated config): its
    run.from_checkpoint source checked, then what follows from them (_decide). config: the
    config as given when the setup's is the whole run's (processes_config); None: the
    setup's."""
    return _decide(setup, seeds, devices, config,
                   transfer.check(setup.config, setup.spaces))


def _decide(setup: Setup, seeds, devices: int, config: Config | None,
            source: transfer.Source | None) -> Plan:
    """The checks that follow from a built setup (log points, devices, replay memory), the
    seed strategy and the mesh."""
    seeds = tuple(int(s) for s in seeds)
    config = setup.config if config is None else config
    spread = per_process(config, jax.process_count())
    logs = setup.run.steps // setup.run.eval_every
    if logs >= streams.SPAN:  # a log point's evaluation and report keys are its own
        raise ValueError(f"run.eval_every_rows: the run has {logs:,} log points; at most "
                         f"{streams.SPAN - 1:,} (run/streams.py)")
    check_devices(setup, len(seeds), devices, spread)
    if setup.run.offline and setup.host:
        raise ValueError(f"--offline: {setup.run.env} steps on the host; an offline run "
                         "trains with a compiled env (its evaluation plays it)")
    data, fsdp = data_devices(setup.run), fsdp_devices(setup.run)
    mine = sum(d.process_index == jax.process_index()
               for d in sharding.mesh_devices(devices, data, spread).flat)
    need = memory.check_replay(setup, len(seeds), devices, mine)
    if setup.host:  # seeds mapped one after the other would not split their envs
        how = "vmap" if data > 1 else setup.run.seed_loop
    else:
        how = "vmap" if devices > 1 or data > 1 else loop.seed_loop(setup)
    if setup.run.replay_memory == "host" and jax.default_backend() != "cpu" and (
            loop.seed_loop(loop.with_run(setup, seed_loop=how)) != "vmap"):
        raise ValueError(f"run.replay_memory=host with run.seed_loop={setup.run.seed_loop}: "
                         "on an accelerator the host replay's seeds are vmapped (vmap or "
                         "auto)")
    resolved = loop.with_run(setup, seed_loop=how) if how != setup.run.seed_loop else setup
    return Plan(config, resolved, seeds, devices, data, fsdp, loop.seed_loop(resolved),
                sharding.run_mesh(devices, data, fsdp, spread), need, source)


def check_devices(setup: Setup, num_seeds: int, devices: int, spread: bool = False) -> None:
    """The run's devices against what its trainer can do and what JAX sees, before anything
    is built or compiled: ValueError naming the flag. devices: --devices (groups of
    seeds); the seed's data devices come from jax.train_devices (--data-devices), over
    all processes (spread: each process's own ones, per_process)."""
    data = data_devices(setup.run)
    if setup.host:
        if devices != 1:
            raise ValueError("--devices: host environments run on one device")
    elif (devices > 1 or data > 1) and setup.run.seed_loop in ("map", "threads"):
        raise ValueError(f"run.seed_loop={setup.run.seed_loop} runs every seed on one "
                         "device; with --devices N or --data-devices N use vmap or auto")
    _check_count(devices, data, num_seeds, spread)


def _check_count(devices: int, data: int, num_seeds: int, spread: bool = False) -> None:
    procs = jax.process_count()
    if spread:  # each process's own devices: --devices x its jax.train_devices
        data, avail = data // procs, jax.local_device_count()
    else:
        avail = len(jax.devices())
    if devices * data > avail:
        need = f"--devices {devices}" + (f" x --data-devices {data}" if data > 1 else "")
        seen = "1 JAX device is" if avail == 1 else f"{avail} JAX devices are"
        where = " on each process" if spread else ""
        raise ValueError(f"{need} needs {devices * data} devices{where} but only {seen} "
                         "visible" + (" to each" if spread else ""))
    if num_seeds % devices:
        raise ValueError(f"{num_seeds} seeds cannot be split evenly over {devices} devices")
    if procs > 1 and not spread:
        held = {d.process_index for d in jax.devices()[:devices * data]}
        if len(held) < procs:
            total = len(jax.devices())
            raise ValueError(
                f"--devices {devices} x --data-devices {data} uses the devices of "
                f"{len(held)} of the {procs} processes: every process of a --distributed "
                f"run needs its part of the mesh (ask for all {total} devices)")
