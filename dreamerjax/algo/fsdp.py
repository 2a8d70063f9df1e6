"""Parameters stored sharded over HEAD's FSDP mesh axis (jax.train_mesh 'd,f,t', f > 1).

HEAD's DreamerV3 defines no partition rules (embodied/jax/agent.py:109-110 @e3f0224), so
HEAD keeps a whole copy of the parameters and optimiser state on every device of its mesh
whatever 'f' is. dreamerjax stores them sharded instead (docs/deviations.md D21): each of
a seed's f devices on the 'fsdp' axis keeps one slice of every large parameter, of the slow
critic and of the optimiser's moments. The batch still splits over all d x f devices as
HEAD's does; inside the update each device gathers the whole parameters, computes its
part's gradients, and keeps only its slice of their average (a reduce-scatter), on which
the optimiser runs. The numbers are those of the replicated update up to the order of
float32 sums.

The rule (the one place it is stated): a leaf of a parameter-shaped tree is split along its
largest axis whose length divides by f (ties: the last such axis); a leaf with no such axis
or with fewer than MIN_ELEMENTS elements stays whole on every device. The rule reads only
the leaf's global shape, so optimiser moments (shaped as their parameter) and the slow
critic (shaped as the critic) follow their parameter without being told.

The functions below run inside shard_map, on one device's blocks; `dims` is the tree of
split axes that `dims_of` derives from the global shapes (REPLICATED for a whole leaf).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

FSDP_AXIS = "fsdp"
REPLICATED = -1
# A gather costs a collective per leaf: below this many elements (4 KiB of float32) the
# bytes a slice saves are not worth it. Biases and norm scales of small nets stay whole.
MIN_ELEMENTS = 1024


@dataclasses.dataclass(frozen=True)
class Fsdp:
    """One seed's FSDP layout: `size` (f > 1) devices on FSDP_AXIS, and the plain data
    axis beside it (`data`, the mesh's 'data' axis). Hashable: a static argument of jit."""

    size: int
    data: str
    axis: str = FSDP_AXIS

    @property
    def batch_axes(self) -> tuple[str, str]:
        """The axes a seed's batch and envs split over, data-major: device (i, j) holds the
        shard that device i * f + j holds on d * f plain data devices."""
        return (self.data, self.axis)


def shard_dim(shape: tuple[int, ...], size: int) -> int:
    """The axis of a leaf of global `shape` split over `size` devices, or REPLICATED."""
    if size <= 1 or math.prod(shape) < MIN_ELEMENTS:
        return REPLICATED
    fits = [k for k, n in enumerate(shape) if n % size == 0]
    if not fits:
        return REPLICATED
    return max(fits, key=lambda k: (shape[k], k))  # largest; ties: the last


def dims_of(shapes: Any, size: int) -> Any:
    """The split axis of every leaf of a tree of global shapes (arrays or
    ShapeDtypeStructs): a tree of ints, REPLICATED for a whole leaf."""
    return jax.tree.map(lambda x: shard_dim(tuple(x.shape), size), shapes)


def spec_entries(shape: tuple[int, ...], size: int, lead: int) -> tuple:
    """PartitionSpec entries of a leaf's axes after its `lead` leading ones (such as the
    seed axis): None up to its split axis, then FSDP_AXIS; () for a whole leaf."""
    k = shard_dim(tuple(shape[lead:]), size)
    return () if k == REPLICATED else (*(None,) * k, FSDP_AXIS)


def gather(tree: Any, dims: Any, fsdp: Fsdp) -> Any:
    """The whole leaves from this device's slices (all_gather along each split axis)."""
    def one(x, k):
        return x if k == REPLICATED else jax.lax.all_gather(x, fsdp.axis, axis=k, tiled=True)

    return jax.tree.map(one, tree, dims)


def mean_scatter(grads: Any, dims: Any, fsdp: Fsdp) -> Any:
    """This device's slice of the gradients averaged over all d x f devices: a split leaf
    is summed over 'fsdp' keeping this device's slice (psum_scatter), then averaged over
    'data'; a whole leaf is averaged over both. grads: whole leaves, this device's part of
    the batch."""
    def one(g, k):
        if k == REPLICATED:
            return jax.lax.pmean(g, fsdp.batch_axes)
        part = jax.lax.psum_scatter(g, fsdp.axis, scatter_dimension=k, tiled=True)
        return jax.lax.pmean(part / fsdp.size, fsdp.data)

    return jax.tree.map(one, grads, dims)


@dataclasses.dataclass(frozen=True)
class Slices:
    """Whole-leaf reductions over a parameter-shaped tree held as slices (`dims`): what
    the optimiser's norms need (optim.scale_by_agc, optim.optimizer_metrics)."""

    dims: Any
    fsdp: Fsdp

    def sumsq(self, tree: Any) -> Any:
        """Each leaf's sum of squares over the whole leaf: a tree of float32 scalars."""
        def one(x, k):
            s = jnp.sum(jnp.square(x)).astype(jnp.float32)
            return s if k == REPLICATED else jax.lax.psum(s, self.fsdp.axis)

        return jax.tree.map(one, tree, self.dims)

    def size(self, tree: Any) -> int:
        """Elements of the whole leaves of tree."""
        return sum(x.size * (1 if k == REPLICATED else self.fsdp.size)
                   for x, k in zip(jax.tree.leaves(tree), jax.tree.leaves(self.dims),
                                   strict=True))
