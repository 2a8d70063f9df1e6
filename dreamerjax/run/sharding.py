"""Where a run's state lives: the mesh of its devices (`run_mesh`: seed x data x fsdp) and
the PartitionSpec of every leaf of its state over it (`state_specs`), the replay's rows in
pinned host memory (`with_host_replay`). run/plan.py lays out the mesh once; the trainers
compile their programs over it (docs/scaling.md)."""

from __future__ import annotations

import jax
import numpy as np

from dreamerjax.algo import fsdp as fsdp_lib
from dreamerjax.run import loop
from dreamerjax.run.setup import SeedState

P = jax.sharding.PartitionSpec


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


def run_mesh(devices: int, data: int, fsdp: int = 1, spread: bool = False):
    """The run's devices as a mesh: `devices` groups of seeds ('seed') x `data` devices
    per seed ('data', loop.DATA_AXIS; only when > 1), as mesh_devices lays them out. With
    fsdp > 1 a seed's `data` devices are data / fsdp ('data') x fsdp ('fsdp',
    fsdp_lib.FSDP_AXIS), device (i, j) the one that is i * fsdp + j of the seed's plain
    data devices. None for one device (and one process). The counts are the plan's, checked
there first (plan.check_devices)."""
    if devices * data <= 1:
        return None
    grid = mesh_devices(devices, data, spread)
    if data == 1:
        return jax.sharding.Mesh(grid.reshape(devices), ("seed",))
    if fsdp > 1:
        grid = grid.reshape(devices, data // fsdp, fsdp)
        return jax.sharding.Mesh(grid, ("seed", loop.DATA_AXIS, fsdp_lib.FSDP_AXIS))
    return jax.sharding.Mesh(grid, ("seed", loop.DATA_AXIS))


def seed_sharding(devices: int):
    """NamedSharding of the seed axis over `devices` devices (None for one)."""
    mesh = run_mesh(devices, 1)
    return None if mesh is None else jax.sharding.NamedSharding(mesh, P("seed"))


def env_axes(fsdp: int) -> str | tuple[str, str]:
    """The mesh axes a seed's envs split over: 'data', or ('data', 'fsdp') jointly."""
    return (loop.DATA_AXIS, fsdp_lib.FSDP_AXIS) if fsdp > 1 else loop.DATA_AXIS


def state_specs(states: SeedState, data: bool, fsdp: int = 1) -> SeedState:
    """The PartitionSpec of every leaf of the run's state: the seed axis over 'seed'; with
    data-parallel seeds the envs' axis of the env states, rows, policy carries and replay
    over 'data' too (each data device keeps its own envs and their replay rows). With
    fsdp > 1 the envs split over ('data', 'fsdp') and every leaf of the agent state is
    split over 'fsdp' as algo/fsdp.py's rule says (parameters, slow critic, optimiser
    moments; counters and the normaliser stay whole)."""
    seed = P("seed")
    env = P("seed", env_axes(fsdp)) if data else seed
    specs = jax.tree.map(lambda _: seed, states)
    if fsdp > 1:
        specs = specs.replace(agent=jax.tree.map(
            lambda x: P("seed", *fsdp_lib.spec_entries(x.shape, fsdp, 1)), states.agent))

    def on_envs(tree):
        return jax.tree.map(lambda _: env, tree)

    replay = specs.replay.replace(data=on_envs(states.replay.data),
                                  count=on_envs(states.replay.count),
                                  prio=on_envs(states.replay.prio),
                                  dirty=on_envs(states.replay.dirty))
    return specs.replace(env=on_envs(states.env), row=on_envs(states.row),
                         carry=on_envs(states.carry), replay=replay)


def with_host_replay(sharding, states: SeedState):
    """The state's sharding (one Sharding for every leaf, or a tree of them) with the
    replay's rows (states.replay.data) in pinned host memory (run.replay_memory host).
    One device's: a NamedSharding over a 1-device mesh, whose memory kind, unlike a
    SingleDeviceSharding's, the traced shapes of an abstract state carry too."""
    if isinstance(sharding, jax.sharding.Sharding):
        sharding = jax.tree.map(lambda _: sharding, states)

    def host(sh):
        if not isinstance(sh, jax.sharding.NamedSharding):
            mesh = jax.sharding.Mesh(np.array(list(sh.device_set)), ("seed",))
            sh = jax.sharding.NamedSharding(mesh, P())
        return sh.with_memory_kind("pinned_host")

    replay = sharding.replay
    return sharding.replace(replay=replay.replace(data=jax.tree.map(host, replay.data)))


def without_rows(tree: SeedState) -> SeedState:
    """The state (or its sharding) less the replay's rows."""
    return tree.replace(replay=tree.replay.replace(data=None))
