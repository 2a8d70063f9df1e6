"""The plan of a run: everything decided about it before anything compiles, built once.

    make_plan(config, seeds, devices)
      -> config/validate.validate(config, seeds)    the one check of the values
      -> processes_config(config, processes)        the whole run of a per-process config
                                                    (e3f0224 over several processes)
      -> setup.make_setup(...)                      the env's spaces (a host env built
                                                    once), the replay's capacity
      -> check_devices, memory.check_replay         the devices and the replay's bytes
      -> transfer.check                             run.from_checkpoint's source
      -> Plan: the seed strategy and the mesh

The command line's preflight, driver.train, the precompile child, `dreamerjax bench` and
the trainers take a Plan; none of them checks the config again.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from dreamerjax.algo import fsdp as fsdp_lib
from dreamerjax.config import validate as config_validate
from dreamerjax.config.defaults import HEAD_REF, Config, data_devices, fsdp_devices
from dreamerjax.config.keys import ConfigError
from dreamerjax.run import loop, memory, streams, transfer
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
    mesh: the run's devices as a mesh (run_mesh), None for one device.
    replay_bytes: the replay of every seed, checked against the memory free for it.
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

    @property
    def host(self) -> bool:
        """Whether the envs step on the host (Setup.host, decided by the registry)."""
        return self.setup.host


def make_plan(config: Config, seeds, devices: int = 1) -> Plan:
    """The plan of a run of `config` with `seeds` over `devices` groups of seeds: the
    config validated (ConfigError naming the key, after EnvError when its env id is
    wrong too), the setup built (each env once), the
    devices and the replay's memory checked (ValueError naming the flag, MemoryError),
    before anything compiles or a directory changes."""
    seeds = tuple(int(s) for s in seeds)
    try:
        config_validate.validate(config, seeds=seeds)
    except ConfigError:
        setup_lib.check_env(config)  # a wrong env id first (EnvError), then the values
        raise
    whole = processes_config(config, jax.process_count())
    return plan_of_setup(setup_lib.make_setup(whole), seeds, devices, config)


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
    """The plan of a run whose setup is built (from a validated config): the checks that
    follow from it (devices, replay memory), the seed strategy and the mesh. config: the
    config as given when the setup's is the whole run's (processes_config); None: the
    setup's."""
    seeds = tuple(int(s) for s in seeds)
    config = setup.config if config is None else config
    spread = per_process(config, jax.process_count())
    logs = setup.run.steps // setup.run.eval_every
    if logs >= streams.SPAN:  # a log point's evaluation and report keys are its own
        raise ValueError(f"run.eval_every_rows: the run has {logs:,} log points; at most "
                         f"{streams.SPAN - 1:,} (run/streams.py)")
    check_devices(setup, len(seeds), devices, spread)
    transfer.check(setup.config, setup.spaces)  # run.from_checkpoint: the source's agent
    if setup.run.offline and setup.host:
        raise ValueError(f"--offline: {setup.run.env} steps on the host; an offline run "
                         "trains with a compiled env (its evaluation plays it)")
    data, fsdp = data_devices(setup.run), fsdp_devices(setup.run)
    mine = sum(d.process_index == jax.process_index()
               for d in mesh_devices(devices, data, spread).flat)
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
                run_mesh(devices, data, len(seeds), fsdp, spread), need)


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


def mesh_devices(devices: int, data: int, spread: bool = False) -> np.ndarray:
    """[devices, data] the run's devices: seed group i's data device j. One process, or
    the config counting devices over all processes (29eb964): the first devices x data
    devices in order. spread (per_process): each process holds data / P of every
    group's data devices, its own local devices i * data / P ... (i + 1) * data / P - 1,
    process-major on the data axis (HEAD's device list, agent.py:80-84 @e3f0224)."""
    if not spread:
        return np.array(jax.devices()[:devices * data]).reshape(devices, data)
    procs = jax.process_count()
    local = data // procs
    own = [sorted((d for d in jax.devices() if d.process_index == p), key=lambda d: d.id)
           for p in range(procs)]
    return np.array([[own[p][i * local + t] for p in range(procs) for t in range(local)]
                     for i in range(devices)])


def run_mesh(devices: int, data: int, num_seeds: int, fsdp: int = 1, spread: bool = False):
    """The run's devices as a mesh: `devices` groups of seeds ('seed') x `data` devices
    per seed ('data', loop.DATA_AXIS; only when > 1), as mesh_devices lays them out. With
    fsdp > 1 a seed's `data` devices are data / fsdp ('data') x fsdp ('fsdp',
    fsdp_lib.FSDP_AXIS), device (i, j) the one that is i * fsdp + j of the seed's plain
    data devices. None for one device (and one process)."""
    _check_count(devices, data, num_seeds, spread)
    if devices * data <= 1:
        return None
    grid = mesh_devices(devices, data, spread)
    if data == 1:
        return jax.sharding.Mesh(grid.reshape(devices), ("seed",))
    if fsdp > 1:
        grid = grid.reshape(devices, data // fsdp, fsdp)
        return jax.sharding.Mesh(grid, ("seed", loop.DATA_AXIS, fsdp_lib.FSDP_AXIS))
    return jax.sharding.Mesh(grid, ("seed", loop.DATA_AXIS))
