"""A run over several processes: the envs one process steps (`EnvPart`: the (seed, env)
pairs whose rows live on its devices) and the host copy of arrays that span processes
(`to_host`). In a one-process run both are the plain numpy path (docs/scaling.md)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from dreamerjax.run.sharding import P, env_axes


def to_host(tree):
    """numpy copies of (possibly sharded) arrays; the arrays that span several processes
    gathered from every process (each holds only its own devices' shards); host values
    (numpy, the same on every process) as they are."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        from dreamerjax.run import distributed
        leaves, treedef = jax.tree.flatten(tree)
        spans = [i for i, x in enumerate(leaves)
                 if isinstance(x, jax.Array) and not x.is_fully_addressable]
        if spans:  # the same leaves on every process: all of them gather, or none
            jax.block_until_ready(tree)  # its own work first: it may lag by minutes
            distributed.barrier("to_host")
            got = multihost_utils.process_allgather([leaves[i] for i in spans], tiled=True)
            for i, x in zip(spans, got, strict=True):
                leaves[i] = x
        tree = jax.tree.unflatten(treedef, leaves)
    return jax.tree.map(np.asarray, tree)


@dataclasses.dataclass(frozen=True)
class EnvPart:
    """The envs of a run that one process steps: the (seed, env) pairs whose rows live on
    its devices under the run's [seeds, envs] sharding (all of them in a one-process
    run), in the order of the seeds then the envs. Its host rows, actions and episode
    ends are [k, ...] over these pairs; the devices see [seeds, envs, ...] arrays.

    seed_index, env_index: [k] each pair's seed position and env index (the env's global
    index within its seed: its reset seed, host_loop.env_seed(seed, env), does not
    depend on the processes). sharding: of the [seeds, envs] leading axes, None when one
    process holds every env (the trainer's plain numpy path)."""

    shape: tuple[int, int]
    seed_index: np.ndarray
    env_index: np.ndarray
    sharding: jax.sharding.NamedSharding | None

    def to_devices(self, tree, lead: int = 0):
        """Host [..., k, ...] leaves (k at axis `lead`) -> [..., seeds, envs, ...]: numpy
        in one process, else arrays over the run's devices put together from every
        process's own part."""
        def one(x):
            x = np.asarray(x)
            full = (*x.shape[:lead], *self.shape, *x.shape[lead + 1:])
            if self.sharding is None:
                return x.reshape(full)
            buf = np.zeros(full, x.dtype)
            buf[(slice(None),) * lead + (self.seed_index, self.env_index)] = x
            spec = P(*([None] * lead), *self.sharding.spec)
            sh = jax.sharding.NamedSharding(self.sharding.mesh, spec)
            return jax.make_array_from_callback(full, sh, lambda index: buf[index])

        return jax.tree.map(one, tree)

    def to_host(self, arr) -> np.ndarray:
        """[seeds, envs, ...] from the devices -> this process's [k, ...], read from its
        own shards only (an array over several processes has no whole value here)."""
        if self.sharding is None:
            x = np.asarray(arr)
            return x.reshape(-1, *x.shape[2:])
        buf = np.zeros(arr.shape, arr.dtype)
        for shard in arr.addressable_shards:
            buf[shard.index] = np.asarray(shard.data)
        return buf[self.seed_index, self.env_index]


def env_part(mesh, fsdp: int, seeds: int, envs: int) -> EnvPart:
    """This process's EnvPart of a run's [seeds, envs] over `mesh` (None: one device)."""
    if jax.process_count() == 1:
        s, w = np.divmod(np.arange(seeds * envs), envs)
        return EnvPart((seeds, envs), s, w, None)
    sharding = jax.sharding.NamedSharding(mesh, P("seed", env_axes(fsdp)))
    mine = np.zeros((seeds, envs), bool)
    for index in sharding.addressable_devices_indices_map((seeds, envs)).values():
        mine[index] = True
    s, w = np.nonzero(mine)
    return EnvPart((seeds, envs), s, w, sharding)
