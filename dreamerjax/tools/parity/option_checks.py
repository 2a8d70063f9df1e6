"""Checks of the reference's training options against its own arrays (both versions).

Fixtures (tests/data/reference_options, README.md there says how they were made):
options_optimizer_<version>.npz, the reference's optimiser with weight decay, global
clipping (29eb964), linear and cosine schedules, separate learning rates (29eb964), and
the learning rate per step over warm-up and annealing; options_norms_<version>.npz, the
reference's moments normaliser of every impl (valnorm / advnorm).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dreamerjax.algo import normalize, optim
from dreamerjax.config.defaults import LrsConfig, NormConfig, OptConfig, Reference
from dreamerjax.tools.parity.fixtures import EPS, Row, _load, compare, register

# Each parameter layer of the fixtures: kernel [3, 4], bias [4], norm/scale [4].
_LEAVES = ("kernel", "bias", "norm/scale")


def _nest(flat: dict[str, np.ndarray]) -> dict:
    """{'enc/norm/scale': x} -> {'enc': {'norm': {'scale': x}}}."""
    out: dict = {}
    for name, v in flat.items():
        *parents, leaf = name.split("/")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = jnp.asarray(v)
    return out


def _get(tree: dict, name: str):
    for p in name.split("/"):
        tree = tree[p]
    return tree


# The fixtures' option runs: tag -> (OptConfig fields, lr, schedule, separate lrs).
_BASE_29 = dict(eps=1e-20, beta1=0.9, beta2=0.999, agc=0.3, pmin=1e-3, warmup=4, anneal=12,
                wd=0.1, globclip=1.0)
_UNIT = dict(eps=1e-20, beta1=0.9, beta2=0.999, agc=0.0, pmin=1e-3, warmup=5, anneal=20)
RUNS_29EB964 = {
    "linear": (dict(_BASE_29, lr=1e-2, schedule="linear"), False),
    "cosine_lrs": (dict(_BASE_29, lr=1e-2, schedule="cosine"), True),
    **{f"lr_{s}": (dict(_UNIT, lr=1e-3, schedule=s), False)
       for s in ("linear", "cosine", "constant")},
}
_BASE_HEAD = dict(lr=1e-2, agc=0.3, eps=1e-20, beta1=0.9, beta2=0.999, wd=0.1, warmup=4,
                  anneal=12)
RUNS_E3F0224 = {
    "linear": (dict(_BASE_HEAD, schedule="linear"), False),
    "cosine": (dict(_BASE_HEAD, schedule="cosine"), False),
    **{f"lr_{s}": (dict(_UNIT, lr=1e-3, schedule=s), False)
       for s in ("linear", "cosine", "const")},
}


def _run(opt, params: dict, grads: list[dict], version: Reference):
    """Apply `opt` step by step; per step the params, the applied update's global norm
    and (29eb964) the reference's optimizer metrics."""

    @jax.jit
    def step(params, state, grads):
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        return params, state, optim.optimizer_metrics(grads, updates, params,
                                                      optim.opt_step(state))

    state = opt.init(params)
    history, metrics = [], []
    for g in grads:
        params, state, m = step(params, state, g)
        history.append(params)
        metrics.append(m)
    return history, metrics


def check_optimizer_options(path: Path) -> Iterable[Row]:
    fx = path.name
    version = (Reference.E3F0224 if "e3f0224" in path.name else Reference.V29EB964)
    d = _load(path)
    modules = [str(m) for m in d["modules"]]
    names = [f"{m}/{k}" for m in modules for k in _LEAVES]
    runs = RUNS_E3F0224 if version == Reference.E3F0224 else RUNS_29EB964
    lrs = (LrsConfig(**dict(zip(modules, (float(x) for x in d["lrs"]), strict=True)))
           if "lrs" in d else None)
    for tag, (fields, separate) in runs.items():
        cfg = OptConfig(**fields)
        opt = optim.make_optimizer(cfg, version, lrs=lrs if separate else None)
        params = _nest({n: d[f"{tag}/init/{n}"] for n in names})
        steps = d[f"{tag}/params/{names[0]}"].shape[0]
        source = "grads" if not tag.startswith("lr_") else None
        grads = [_nest({n: (d[f"grads/{n}"][s % d[f"grads/{n}"].shape[0]] if source
                            else np.ones_like(d[f"{tag}/init/{n}"])) for n in names})
                 for s in range(steps)]
        history, metrics = _run(opt, params, grads, version)
        for n in names:
            ours = np.stack([np.asarray(_get(h, n)) for h in history])
            ref = d[f"{tag}/params/{n}"]
            yield compare(fx, f"{tag}/params/{n} (steps 1-{steps})", ours, ref,
                          atol=4 * EPS * np.abs(ref).max(), rtol=4 * EPS,
                          tol="rtol 4 eps + 4 eps * max|param|")
        unorm = np.array([float(m["opt_update_norm"]) for m in metrics])
        ref_unorm = d[f"{tag}/met/update_norm" if f"{tag}/met/update_norm" in d
                      else f"{tag}/update_norm"]
        yield compare(fx, f"{tag} update norm per step", unorm, ref_unorm,
                      atol=4 * EPS * np.abs(ref_unorm).max(), rtol=4 * EPS,
                      tol="rtol 4 eps + 4 eps * max")
        if version == Reference.V29EB964:
            for key in ("grad_norm", "param_norm"):
                ours = np.array([float(m[f"opt_{key}"]) for m in metrics])
                yield compare(fx, f"{tag} {key} per step", ours, d[f"{tag}/met/{key}"],
                              rtol=4 * EPS, tol="rtol 4 eps")
            ours = np.array([int(m["opt_grad_steps"]) for m in metrics])
            yield compare(fx, f"{tag} grad_steps", ours, d[f"{tag}/met/grad_steps"],
                          tol="exact")
        if tag.startswith("lr_"):
            # Unit gradients: each update is lr_t times the bias-corrected RMS-scaled
            # momentum of the unit steps, the same for every element; that factor comes
            # from our chain at lr 1 without warm-up or schedule, so the reference's
            # update norm over lr_t (ours, optim.learning_rate) is checked per step.
            flat = dataclasses.replace(cfg, lr=1.0, warmup=0,
                                       schedule=optim.SCHEDULES[version][0])
            _, unit = _run(optim.make_optimizer(flat, version), params, grads, version)
            factor = np.array([float(m["opt_update_norm"]) for m in unit])
            lr_t = np.array([float(optim.learning_rate(cfg, version, s)) for s in range(steps)])
            yield compare(fx, f"{tag} learning rate per step (warm-up {cfg.warmup}, "
                          f"anneal {cfg.anneal})", lr_t * factor, ref_unorm,
                          atol=4 * EPS * np.abs(ref_unorm).max(), rtol=8 * EPS,
                          tol="rtol 8 eps + 4 eps * max")


def check_norms(path: Path) -> Iterable[Row]:
    fx = path.name
    version = (Reference.E3F0224 if "e3f0224" in path.name else Reference.V29EB964)
    d = _load(path)
    batches = d["batches"]
    tags = sorted({k.rsplit("/", 1)[0] for k in d if k.endswith("/offset")})
    for tag in tags:
        impl, params = tag.split("/")
        rate, limit = (float(x) for x in params[len("rate"):].split("_limit"))
        cfg = NormConfig(impl=impl, rate=rate, limit=limit)

        @jax.jit
        def step(state, x, cfg=cfg):
            state = normalize.norm_update(state, x, cfg, version)
            return state, normalize.norm_stats(state, cfg, version)

        state = normalize.norm_init(cfg, version)
        first = normalize.norm_stats(state, cfg, version)
        offs, scales = [np.float32(first[0])], [np.float32(first[1])]
        for x in batches:
            state, (off, scale) = step(state, jnp.asarray(x))
            offs.append(np.float32(off))
            scales.append(np.float32(scale))
        for key, ours in (("offset", offs), ("scale", scales)):
            ref = d[f"{tag}/{key}"]
            yield compare(fx, f"{tag}/{key} (before and after {len(batches)} updates)",
                          np.stack(ours), ref, atol=8 * EPS * np.abs(ref).max(),
                          rtol=8 * EPS, tol="rtol 8 eps + 8 eps * max")
        ref_state = {k.rsplit("/", 1)[1]: d[k] for k in d if k.startswith(f"{tag}/state/")}
        alias = {"lo": "low", "hi": "high"}
        for k, v in sorted(ref_state.items()):
            ours = np.asarray(state[alias.get(k, k)])
            yield compare(fx, f"{tag}/state/{k}", ours, v, atol=8 * EPS * abs(float(v)),
                          rtol=8 * EPS, tol="rtol 8 eps + 8 eps * |ref|")
        if not ref_state:
            yield compare(fx, f"{tag}/state (empty: off)", np.float32(len(state)),
                          np.float32(0), tol="exact")


register("options_optimizer_*.npz", check_optimizer_options)
register("options_norms_*.npz", check_norms)

__all__ = ["check_norms", "check_optimizer_options"]
