"""The plan of a run: everything decided about it before anything compiles, built once.

    make_plan(config, seeds, devices)
      -> config/validate.validate(config, seeds)    the one check of the values
      -> setup.make_setup(config)                   the env's spaces (a host env built
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
from dreamerjax.config.defaults import Config, data_devices, fsdp_devices
from dreamerjax.run import loop, memory, streams, transfer
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.setup import Setup


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """A run as decided before it starts.

    config: the validated config as given (what config.json holds).
    setup: the run's Setup (env spec, spaces, replay capacity, host or compiled) with
        run.seed_loop resolved to `seed_loop`.
    seeds: the run's seeds; devices: --devices (groups of seeds); data, fsdp: a seed's
        data devices and the FSDP part of them (jax.train_devices, jax.train_mesh).
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
    config validated (ConfigError naming the key), the setup built (each env once), the
    devices and the replay's memory checked (ValueError naming the flag, MemoryError),
    before anything compiles or a directory changes."""
    seeds = tuple(int(s) for s in seeds)
    config_validate.validate(config, seeds=seeds)
    return plan_of_setup(setup_lib.make_setup(config), seeds, devices)


def plan_of_setup(setup: Setup, seeds, devices: int = 1) -> Plan:
    """The plan of a run whose setup is built (from a validated config): the checks that
    follow from it (devices, replay memory), the seed strategy and the mesh."""
    seeds = tuple(int(s) for s in seeds)
    logs = setup.run.steps // setup.run.eval_every
    if logs >= streams.SPAN:  # a log point's evaluation and report keys are its own
        raise ValueError(f"run.eval_every_rows: the run has {logs:,} log points; at most "
                         f"{streams.SPAN - 1:,} (run/streams.py)")
    check_devices(setup, len(seeds), devices)
    transfer.check(setup.config, setup.spaces)  # run.from_checkpoint: the source's agent
    need = memory.check_replay(setup, len(seeds), devices)
    data, fsdp = data_devices(setup.run), fsdp_devices(setup.run)
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
    return Plan(setup.config, resolved, seeds, devices, data, fsdp, loop.seed_loop(resolved),
                run_mesh(devices, data, len(seeds), fsdp), need)


def check_devices(setup: Setup, num_seeds: int, devices: int) -> None:
    """The run's devices against what its trainer can do and what JAX sees, before anything
    is built or compiled: ValueError naming the flag. devices: --devices (groups of
    seeds); the seed's data devices come from jax.train_devices (--data-devices)."""
    data = data_devices(setup.run)
    if setup.host:
        if devices != 1:
            raise ValueError("--devices: host environments run on one device")
    elif (devices > 1 or data > 1) and setup.run.seed_loop in ("map", "threads"):
        raise ValueError(f"run.seed_loop={setup.run.seed_loop} runs every seed on one "
                         "device; with --devices N or --data-devices N use vmap or auto")
    _check_count(devices, data, num_seeds)


def _check_count(devices: int, data: int, num_seeds: int) -> None:
    avail = len(jax.devices())
    if devices * data > avail:
        need = f"--devices {devices}" + (f" x --data-devices {data}" if data > 1 else "")
        seen = "1 JAX device is" if avail == 1 else f"{avail} JAX devices are"
        raise ValueError(f"{need} needs {devices * data} devices but only {seen} visible")
    if num_seeds % devices:
        raise ValueError(f"{num_seeds} seeds cannot be split evenly over {devices} devices")


def run_mesh(devices: int, data: int, num_seeds: int, fsdp: int = 1):
    """The run's devices as a mesh: `devices` groups of seeds ('seed') x `data` devices
    per seed ('data', loop.DATA_AXIS; only when > 1). With fsdp > 1 a seed's `data`
    devices are data / fsdp ('data') x fsdp ('fsdp', fsdp_lib.FSDP_AXIS), device (i, j)
    the one that is i * fsdp + j of the seed's plain data devices. None for one device."""
    if devices * data <= 1:
        return None
    _check_count(devices, data, num_seeds)
    avail = jax.devices()
    if data == 1:
        return jax.sharding.Mesh(np.array(avail[:devices]), ("seed",))
    if fsdp > 1:
        grid = np.array(avail[:devices * data]).reshape(devices, data // fsdp, fsdp)
        return jax.sharding.Mesh(grid, ("seed", loop.DATA_AXIS, fsdp_lib.FSDP_AXIS))
    grid = np.array(avail[:devices * data]).reshape(devices, data)
    return jax.sharding.Mesh(grid, ("seed", loop.DATA_AXIS))
