"""The reference optimiser as optax transformations (jaxutils.py:398-713 @29eb964).

Chain: adaptive gradient clipping (AGC) -> RMS scaling (bias-corrected second moment) ->
momentum (bias-corrected first moment) -> scale by -lr -> linear warmup. Normalising by the
second moment before the momentum makes this LaProp rather than Adam. All transformations
work on any pytree of float32 parameters (nested dicts included).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dreamerjax.config.defaults import OptConfig, Reference

f32 = jnp.float32
i32 = jnp.int32


class ScaleByRmsState(NamedTuple):
    count: jax.Array  # int32, updates seen
    nu: optax.Updates  # EMA of squared gradients


class ScaleByMomentumState(NamedTuple):
    count: jax.Array  # int32
    mu: optax.Updates  # EMA of the RMS-scaled updates


class WarmupState(NamedTuple):
    count: jax.Array  # int32; equals the reference's `opt/step` counter


def _increment(count: jax.Array) -> jax.Array:
    """count + 1 without int32 overflow (optax.safe_int32_increment)."""
    return jnp.where(count < np.iinfo(np.int32).max, count + 1, count)


def _bias_correction(moment: Any, decay: float, count: jax.Array) -> Any:
    """moment / (1 - decay**count), as optax's bias_correction."""
    correction = 1 - decay**count
    return jax.tree.map(lambda t: t / correction.astype(t.dtype), moment)


def scale_by_agc(clip: float = 0.3, pmin: float = 1e-3, *,
                 slices: Any = None) -> optax.GradientTransformation:
    """Adaptive gradient clipping per parameter tensor (jaxutils.py:660-674).

    Each tensor's update is scaled down so that ||u|| <= clip * max(pmin, ||param||).
    slices: an fsdp.Slices when the parameters and updates are this device's slices of
    them; the norms are then those of the whole tensors.
    """

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("scale_by_agc needs the parameters")

        def clip_one(param, update):
            unorm = jnp.linalg.norm(update.flatten(), 2)
            pnorm = jnp.linalg.norm(param.flatten(), 2)
            upper = clip * jnp.maximum(pmin, pnorm)
            return update * (1 / jnp.maximum(1.0, unorm / upper))

        if slices is None:
            return jax.tree.map(clip_one, params, updates), state

        def clip_slice(update, usq, psq):
            upper = clip * jnp.maximum(pmin, jnp.sqrt(psq))
            return update * (1 / jnp.maximum(1.0, jnp.sqrt(usq) / upper))

        return jax.tree.map(clip_slice, updates, slices.sumsq(updates),
                            slices.sumsq(params)), state

    return optax.GradientTransformation(init_fn, update_fn)


def scale_by_rms(beta: float = 0.999, eps: float = 1e-20) -> optax.GradientTransformation:
    """u / (sqrt(nu_hat) + eps) with nu = beta nu + (1 - beta) u^2 (jaxutils.py:677-692)."""

    def init_fn(params):
        nu = jax.tree.map(lambda t: jnp.zeros_like(t, f32), params)
        return ScaleByRmsState(count=jnp.zeros((), i32), nu=nu)

    def update_fn(updates, state, params=None):
        del params
        count = _increment(state.count)
        nu = jax.tree.map(lambda v, u: beta * v + (1 - beta) * (u * u), state.nu, updates)
        nu_hat = _bias_correction(nu, beta, count)
        updates = jax.tree.map(lambda u, v: u / (jnp.sqrt(v) + eps), updates, nu_hat)
        return updates, ScaleByRmsState(count=count, nu=nu)

    return optax.GradientTransformation(init_fn, update_fn)


def scale_by_momentum(beta: float = 0.9) -> optax.GradientTransformation:
    """Bias-corrected EMA of the updates, mu = (1 - beta) u + beta mu (jaxutils.py:695-713)."""

    def init_fn(params):
        mu = jax.tree.map(lambda t: jnp.zeros_like(t, f32), params)
        return ScaleByMomentumState(count=jnp.zeros((), i32), mu=mu)

    def update_fn(updates, state, params=None):
        del params
        count = _increment(state.count)
        mu = jax.tree.map(lambda g, t: (1 - beta) * g + beta * t, updates, state.mu)
        return _bias_correction(mu, beta, count), ScaleByMomentumState(count=count, mu=mu)

    return optax.GradientTransformation(init_fn, update_fn)


def warmup_factor(count: jax.Array, warmup: int) -> jax.Array:
    """clip(count / warmup, 0, 1), 1 when warmup == 0 (jaxutils.py:510-524).

    `count` is the number of updates applied before this one, so with warmup 1000 the
    first update is exactly zero and update 1001 is the first at full learning rate.
    """
    if warmup <= 0:
        return jnp.ones((), f32)
    return jnp.clip(jnp.asarray(count).astype(f32) / warmup, 0, 1)


def scale_by_warmup(warmup: int) -> optax.GradientTransformation:
    """Multiply the updates by `warmup_factor(count)`; count = updates before this one."""

    def init_fn(params):
        del params
        return WarmupState(count=jnp.zeros((), i32))

    def update_fn(updates, state, params=None):
        del params
        if warmup > 0:
            factor = warmup_factor(state.count, warmup)
            updates = jax.tree.map(lambda u: u * factor, updates)
        return updates, WarmupState(count=_increment(state.count))

    return optax.GradientTransformation(init_fn, update_fn)


def e3f0224_learning_rate(cfg: OptConfig) -> optax.GradientTransformation:
    """e3f0224's learning rate (agent.py:366-378 @e3f0224): a linear ramp from 0 over
    `warmup` updates joined to the constant lr, applied by optax's scale_by_learning_rate
    (u * -lr_t) where 29eb964 scales by -lr and then by the warmup factor."""
    sched = optax.constant_schedule(cfg.lr)
    if cfg.warmup:
        ramp = optax.linear_schedule(0.0, cfg.lr, cfg.warmup)
        sched = optax.join_schedules([ramp, sched], [cfg.warmup])
    return optax.scale_by_learning_rate(sched)


def make_optimizer(cfg: OptConfig, version: Reference = Reference.V29EB964, *,
                   slices: Any = None) -> optax.GradientTransformation:
    """The reference's default `opt` (configs.yaml `opt`, jaxutils.py:429-457 @29eb964;
    agent.py:342-379 @e3f0224 for version e3f0224).

    AGC is left out when cfg.agc == 0, as in the reference. The state is a tuple; read it
    with `opt_moments` / `opt_step` (e3f0224's chain keeps a warmup-0 stage as its counter).
    slices: see scale_by_agc (every other stage works element by element).
    """
    e3f0224 = version == Reference.E3F0224
    chain = []
    if cfg.agc or e3f0224:  # e3f0224's clip_by_agc passes the updates through at agc 0
        chain.append(scale_by_agc(cfg.agc, cfg.pmin, slices=slices) if cfg.agc
                     else optax.identity())
    chain += [scale_by_rms(cfg.beta2, cfg.eps), scale_by_momentum(cfg.beta1)]
    if e3f0224:
        chain += [e3f0224_learning_rate(cfg), scale_by_warmup(0)]
    else:
        chain += [optax.scale(-cfg.lr), scale_by_warmup(cfg.warmup)]
    return optax.chain(*chain)


def _find_state(opt_state: Any, kind: type) -> Any:
    found = [s for s in jax.tree.leaves(
        opt_state, is_leaf=lambda s: isinstance(s, kind)) if isinstance(s, kind)]
    if len(found) != 1:
        raise ValueError(f"expected one {kind.__name__} in the optimizer state, got {len(found)}")
    return found[0]


def opt_moments(opt_state: Any) -> tuple[Any, Any, jax.Array, jax.Array]:
    """(nu, mu, rms_count, mom_count) of a `make_optimizer` state (fixture h compares them)."""
    rms = _find_state(opt_state, ScaleByRmsState)
    mom = _find_state(opt_state, ScaleByMomentumState)
    return rms.nu, mom.mu, rms.count, mom.count


def opt_step(opt_state: Any) -> jax.Array:
    """Updates applied so far (int32): the reference's `opt/step` counter."""
    return _find_state(opt_state, WarmupState).count


def global_norm(tree: Any, slices: Any = None) -> jax.Array:
    """sqrt of the sum of squares of every leaf (optax.global_norm); of the whole leaves
    when they are slices (an fsdp.Slices)."""
    if slices is not None:
        return jnp.sqrt(sum(jax.tree.leaves(slices.sumsq(tree))))
    leaves = jax.tree.leaves(tree)
    return jnp.sqrt(sum(jnp.sum(x * x) for x in leaves))


def tree_rms(tree: Any, slices: Any = None) -> jax.Array:
    """sqrt(sum of squares / element count) over every leaf (embodied/jax/nets.py:120-124
    @e3f0224); of the whole leaves when they are slices (an fsdp.Slices)."""
    if slices is not None:
        return jnp.sqrt(jnp.stack(jax.tree.leaves(slices.sumsq(tree))).sum()
                        / f32(slices.size(tree)))
    leaves = jax.tree.leaves(tree)
    count = sum(x.size for x in leaves)
    sumsq = jnp.stack([jnp.square(x).sum().astype(f32) for x in leaves]).sum()
    return jnp.sqrt(sumsq / f32(count))


def optimizer_metrics(
    grads: Any, updates: Any, new_params: Any, step: jax.Array, rms: bool = False, *,
    slices: Any = None,
) -> dict[str, jax.Array]:
    """The reference's optimizer metrics (jaxutils.py:525-549) under the `opt_` prefix.

    grads: raw gradients (before AGC); updates: the applied update; new_params: params
    after the update; step: update count after this update (int32). rms: add HEAD's
    grad_rms / update_rms / param_rms (opt.py:73-79 @e3f0224). slices: an fsdp.Slices
    when the trees are this device's slices; the norms and the count are the whole's.
    """
    count = (sum(int(np.prod(x.shape)) for x in jax.tree.leaves(new_params))
             if slices is None else slices.size(new_params))
    if rms:
        return {**optimizer_metrics(grads, updates, new_params, step, slices=slices),
                "opt_grad_rms": tree_rms(grads, slices),
                "opt_update_rms": tree_rms(updates, slices),
                "opt_param_rms": tree_rms(new_params, slices)}
    return {
        "opt_grad_norm": global_norm(grads, slices),
        "opt_update_norm": global_norm(updates, slices),
        "opt_param_norm": global_norm(new_params, slices),
        "opt_grad_steps": jnp.asarray(step, i32),
        "opt_param_count": jnp.asarray(count, i32),
    }


def slow_update(
    slow_params: Any, params: Any, updates_count: jax.Array, fraction: float, period: int,
    copy_first: bool = True,
) -> tuple[Any, jax.Array]:
    """Slow (target) critic EMA, applied after the optimizer step (jaxutils.py:737-762).

    mix = clip([count == 0] + fraction * [count % period == 0], 0, 1), so the first call
    copies the critic and later calls mix in `fraction` every `period` updates.
    copy_first False: HEAD's SlowModel (utils.py:113-119 @e3f0224), which starts as a copy
    and mixes from the first update on.
    Returns (new_slow_params, count + 1).
    """
    first = (updates_count == 0) & copy_first
    due = updates_count % period == 0
    # The first call copies outright; afterwards blend in `fraction` when due.
    weight = jnp.where(first, 1.0, jnp.where(due, jnp.float32(fraction), 0.0)).astype(f32)
    blend = lambda new, old: weight * new + (1 - weight) * old  # noqa: E731
    return jax.tree.map(blend, params, slow_params), updates_count + 1
