"""The reference optimiser as optax transformations (jaxutils.py:398-713 @29eb964).

Chain: adaptive gradient clipping (AGC) -> RMS scaling (bias-corrected second moment) ->
momentum (bias-corrected first moment) -> scale by -lr -> linear warmup. Normalising by the
second moment before the momentum makes this LaProp rather than Adam. All transformations
work on any pytree of float32 parameters (nested dicts included).

The reference's options add stages only when set, so the default chain is the one above:
global-norm clipping first (opt.globclip, 29eb964), weight decay on the kernels after the
momentum (opt.wd), one learning rate per module (separate_lrs, 29eb964) and a linear or
cosine annealing of the learning rate after the warm-up (opt.schedule, opt.anneal), whose
formula differs between the versions (`schedule_factor_29eb964`, `e3f0224_learning_rate`).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dreamerjax.config.defaults import (
    SCHEDULES,
    LrsConfig,
    OptConfig,
    Reference,
    check_opt_options,
)

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


def is_constant(schedule: str) -> bool:
    """Whether opt.schedule names the constant learning rate (either version's spelling:
    'constant' at 29eb964, 'const' at e3f0224)."""
    return schedule in (SCHEDULES[Reference.V29EB964][0], SCHEDULES[Reference.E3F0224][0])


def schedule_factor_29eb964(count: jax.Array, warmup: int, schedule: str,
                            anneal: int) -> jax.Array:
    """29eb964's learning-rate multiplier (jaxutils.py:510-523): the warm-up ramp
    clip(step / warmup, 0, 1) times, with prog = clip((step - warmup) / (anneal - warmup),
    0, 1), 1 - prog (linear) or (1 + cos(pi prog)) / 2 (cosine). `count`: updates applied
    before this one (the reference's opt/step)."""
    step = jnp.asarray(count).astype(f32)
    scale = warmup_factor(count, warmup)
    if is_constant(schedule):
        return scale
    prog = jnp.clip((step - warmup) / f32(anneal - warmup), 0, 1)
    if schedule == "linear":
        return scale * (1 - prog)
    if schedule == "cosine":
        return scale * (0.5 * (1 + jnp.cos(jnp.pi * prog)))
    raise ValueError(f"opt.schedule: {schedule!r}; choose one of "
                     f"{', '.join(SCHEDULES[Reference.V29EB964])}")


def scale_by_warmup(warmup: int, schedule: str = "constant",
                    anneal: int = 0) -> optax.GradientTransformation:
    """Multiply the updates by `warmup_factor(count)`, annealed after the warm-up by
    `schedule` (schedule_factor_29eb964); count = updates before this one."""

    def init_fn(params):
        del params
        return WarmupState(count=jnp.zeros((), i32))

    def update_fn(updates, state, params=None):
        del params
        if not is_constant(schedule):
            factor = schedule_factor_29eb964(state.count, warmup, schedule, anneal)
            updates = jax.tree.map(lambda u: u * factor, updates)
        elif warmup > 0:
            factor = warmup_factor(state.count, warmup)
            updates = jax.tree.map(lambda u: u * factor, updates)
        return updates, WarmupState(count=_increment(state.count))

    return optax.GradientTransformation(init_fn, update_fn)


def clip_by_global_norm(max_norm: float, *, slices: Any = None
                        ) -> optax.GradientTransformation:
    """optax.clip_by_global_norm as 29eb964 runs it (jaxutils.py:435-436, optax 0.2.2):
    the norm is sqrt of the sum of the leaves' sums of squares (`global_norm`); of the
    whole tensors' norm when the updates are slices (an fsdp.Slices)."""

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        g_norm = global_norm(updates, slices)
        trigger = jnp.squeeze(g_norm < max_norm)
        clip = lambda t: jax.lax.select(  # noqa: E731
            trigger, t, (t / g_norm.astype(t.dtype)) * max_norm)
        return jax.tree.map(clip, updates), state

    return optax.GradientTransformation(init_fn, update_fn)


# The parameters weight decay applies to: the reference's pattern over its parameter names
# (wd_pattern, jaxutils.py:412 @29eb964; wdregex, agent.py:352 @e3f0224), the kernels.
WD_PATTERN = r"/kernel$"


def param_name(path) -> str:
    """The reference's name of a parameter from its path in our tree ('agent/enc/...':
    the tree's keys joined by '/', nets.py's layout)."""
    return "/".join(["agent", *(str(getattr(k, "key", k)) for k in path)])


def weight_decay_mask(params: Any) -> Any:
    """True for the leaves whose reference name matches WD_PATTERN, as the reference's
    wdmaskfn / wdmask (re.search over the name)."""
    pattern = re.compile(WD_PATTERN)
    return jax.tree_util.tree_map_with_path(
        lambda path, _: bool(pattern.search(param_name(path))), params)


def _scaled(tree: Any, factor: float) -> Any:
    return jax.tree.map(lambda u: u * factor, tree)


def scale_by_module(lrs: LrsConfig) -> optax.GradientTransformation:
    """Each module's updates times its own -lr (separate_lrs, agent.py:84-86 and
    scale_by_groups, jaxutils.py:619-657 @29eb964): the top-level keys of the tree are the
    modules, the groups 'agent/<module>' of the reference."""

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        missing = [k for k in updates if not hasattr(lrs, k)]
        if missing:
            raise ValueError(f"lrs: no learning rate for the module(s) {missing}")
        return {k: _scaled(v, -getattr(lrs, k)) for k, v in updates.items()}, state

    return optax.GradientTransformation(init_fn, update_fn)


def e3f0224_schedule(cfg: OptConfig) -> optax.Schedule:
    """e3f0224's learning rate per update count (agent.py:366-377 @e3f0224): after a
    linear ramp from 0 over `warmup` updates, the constant lr, or from lr over
    anneal - warmup updates linearly down to 0.1 lr, or along optax's cosine decay whose
    third argument, alpha (a fraction of lr), the reference gives as 0.1 * lr. 29eb964's
    formula differs (schedule_factor_29eb964)."""
    if is_constant(cfg.schedule):
        sched = optax.constant_schedule(cfg.lr)
    elif cfg.schedule == "linear":
        sched = optax.linear_schedule(cfg.lr, 0.1 * cfg.lr, cfg.anneal - cfg.warmup)
    elif cfg.schedule == "cosine":
        sched = optax.cosine_decay_schedule(cfg.lr, cfg.anneal - cfg.warmup, 0.1 * cfg.lr)
    else:
        raise ValueError(f"agent.opt.schedule: {cfg.schedule!r}; choose one of "
                         f"{', '.join(SCHEDULES[Reference.E3F0224])}")
    if cfg.warmup:
        ramp = optax.linear_schedule(0.0, cfg.lr, cfg.warmup)
        sched = optax.join_schedules([ramp, sched], [cfg.warmup])
    return sched


def e3f0224_learning_rate(cfg: OptConfig) -> optax.GradientTransformation:
    """e3f0224's learning rate (agent.py:366-378 @e3f0224), `e3f0224_schedule` applied by
    optax's scale_by_learning_rate (u * -lr_t) where 29eb964 scales by -lr and then by
    the warmup factor."""
    return optax.scale_by_learning_rate(e3f0224_schedule(cfg))


def learning_rate(cfg: OptConfig, version: Reference, count: jax.Array,
                  lr: float | None = None) -> jax.Array:
    """The learning rate of the update after `count` updates, as the reference applies it
    (29eb964: lr times schedule_factor_29eb964; e3f0224: e3f0224_schedule). lr: a
    module's own (separate_lrs) in place of cfg.lr."""
    if version == Reference.E3F0224:
        return e3f0224_schedule(cfg)(count)
    return (cfg.lr if lr is None else lr) * schedule_factor_29eb964(
        count, cfg.warmup, cfg.schedule, cfg.anneal)


def make_optimizer(cfg: OptConfig, version: Reference = Reference.V29EB964, *,
                   slices: Any = None, lrs: LrsConfig | None = None
                   ) -> optax.GradientTransformation:
    """The reference's `opt` (configs.yaml `opt`, jaxutils.py:429-457 @29eb964;
    agent.py:342-379 @e3f0224 for version e3f0224).

    AGC is left out when cfg.agc == 0, as in the reference; so are global clipping at
    globclip 0 and weight decay at wd 0. lrs: one learning rate per module in place of
    cfg.lr (separate_lrs, 29eb964), the parameters a dict keyed by module. The state is a
    tuple; read it with `opt_moments` / `opt_step` (e3f0224's chain keeps a warmup-0 stage
    as its counter). slices: see scale_by_agc (every other stage works element by element).
    """
    check_opt_options(cfg, version, lrs is not None)
    e3f0224 = version == Reference.E3F0224
    chain = []
    if cfg.globclip:
        chain.append(clip_by_global_norm(cfg.globclip, slices=slices))
    if cfg.agc or e3f0224:  # e3f0224's clip_by_agc passes the updates through at agc 0
        chain.append(scale_by_agc(cfg.agc, cfg.pmin, slices=slices) if cfg.agc
                     else optax.identity())
    chain += [scale_by_rms(cfg.beta2, cfg.eps), scale_by_momentum(cfg.beta1)]
    if cfg.wd:
        chain.append(optax.add_decayed_weights(cfg.wd, weight_decay_mask))
    if e3f0224:
        chain += [e3f0224_learning_rate(cfg), scale_by_warmup(0)]
    else:
        chain += [optax.scale(-cfg.lr) if lrs is None else scale_by_module(lrs),
                  scale_by_warmup(cfg.warmup, cfg.schedule, cfg.anneal)]
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


# The names optimizer_metrics reports, and HEAD's three more (rms=True).
OPT_METRICS = ("opt_grad_norm", "opt_update_norm", "opt_param_norm", "opt_grad_steps",
               "opt_param_count")
OPT_RMS_METRICS = ("opt_grad_rms", "opt_update_rms", "opt_param_rms")


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
        rmss = (tree_rms(grads, slices), tree_rms(updates, slices), tree_rms(new_params, slices))
        return {**optimizer_metrics(grads, updates, new_params, step, slices=slices),
                **dict(zip(OPT_RMS_METRICS, rmss, strict=True))}
    return dict(zip(OPT_METRICS, (
        global_norm(grads, slices), global_norm(updates, slices),
        global_norm(new_params, slices), jnp.asarray(step, i32), jnp.asarray(count, i32)),
        strict=True))


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
