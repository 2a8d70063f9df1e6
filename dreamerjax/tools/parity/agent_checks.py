"""Parity of the agent against the reference fixtures f/i (world model), g/i/j (full loss)
and h/i/j (two train steps), README sections f-j of tests/data/reference.

A fixture family is named by its suffix: `wm_loss{sfx}.npz` with `wm_params{sfx}.npz` and
`wm_config{sfx}.yaml`; `ac_loss{sfx}.npz` with `ac_params{sfx}.npz`; `update{sfx}.npz`
(its own start state); the config `ac_config{sfx}.yaml` (falling back to ac_config.yaml,
which the centered variant shares). Config, spaces and sampling are read from the files:
the yaml gives the sizes and hyperparameters (options we do not implement are refused by
name), the `data_*` arrays the observation keys (shape, dtype) and the action type, the
actor's output kernel (or the one-hot previous actions) the action count, and the stored
imagined actions the sampling (the fixtures replaced every sample by the mode; the
continuous eps variant by mean + eps * std, eps measured from the arrays).

Our parameter paths equal the reference's without the `agent/` prefix, so the name map is
`agent/<module>/<path>` -> params[module][path...]; `agent/slowcritic/...` is our `slow`.

Two-hot expectations run in the reference's own summation order (`pairsum`), so rewards,
values and returns of the fixtures whose heads carry mass on the outer bins (|b| up to
4.85e8) are compared at float32 level; our default exact expectation is checked against a
float64 expectation of the same logits, row by row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo import numerics as nm
from dreamerjax.algo.normalize import RetNormState
from dreamerjax.algo.optim import opt_moments
from dreamerjax.config.defaults import AgentConfig
from dreamerjax.tools.parity import fixtures as fixtures_lib
from dreamerjax.tools.parity.agent_fixtures import (
    _load,
    _obs_batch,
    actor_noise,
    batch_from,
    config_from_yaml,
    config_path,
    deterministic_actor,
    flatten,
    nest,
    spaces_from,
    suffix_of,
    yaml_spaces,
)
from dreamerjax.tools.parity.fixtures import Row

PREFIX = "agent/"
EPS32 = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class Tol:
    """Pass when |ours - ref| <= atol + rtol * |ref| elementwise (atol may be an array of
    the compared shape); `why` says where it comes from."""

    atol: float | np.ndarray
    rtol: float
    why: str = "float32"

    def describe(self) -> str:
        a = self.atol
        atol = f"{a:g}" if np.ndim(a) == 0 else f"per-element (max {np.max(a):.3g})"
        return f"atol {atol} + rtol {self.rtol:g} ({self.why})"


# Float32-level tolerances, by depth of the computation. A forward pass through a dozen
# layers and a 12-step scan accumulates a few ulps per op; 1e-5 / 1e-4 relative cover that
# with margin while a real formula difference (a missing term, a wrong sign, another
# constant) is orders of magnitude larger (tests/test_parity_mutations.py).
TIGHT = Tol(1e-6, 1e-5, "float32, shallow computation")
DEEP = Tol(1e-5, 1e-4, "float32 through the RSSM scan and heads")
PARAMS = Tol(1e-7, 1e-6, "float32; one update moves params by <= lr = 4e-5")
MOMENTS = Tol(1e-6, 1e-4, "float32; gradients with cancellation")
UNDERFLOW = Tol(0.0, 5e-2, "g^2 underflows float32: update = g * 1e20 amplifies the "
                "rounding of a ~1e-20 gradient (docs/deviations.md)")


def _moment_tol(grad_scale: np.ndarray) -> Tol:
    """Optimiser moments hold (scaled) gradients: each element is a sum over the batch of
    terms of both signs, whose float32 rounding is relative to the terms, not to the sum,
    so an element that cancels to near zero carries an absolute error of the tensor's
    scale: 1e-5 of the tensor's largest |element| besides 1e-4 relative."""
    return Tol(np.maximum(1e-6, 1e-5 * grad_scale), 1e-4,
               "float32; gradients with cancellation: 1e-4 rel + 1e-5 of the tensor's max")


# ----------------------------------------------------------------------------- rows


def compare(fixture: str, name: str, ours, ref, tol: Tol, note: str = "") -> Row:
    """fixtures.compare with a Tol: |ours - ref| <= atol + rtol * |ref| elementwise."""
    return fixtures_lib.compare(fixture, name, ours, ref, atol=tol.atol, rtol=tol.rtol,
                                tol=tol.describe(), note=note)


def missing(fixture: str, name: str) -> Row:
    """A failing row for an array the reference has and we do not."""
    return Row(fixture, name, None, None, "missing in ours", False)


def _probs64(logits) -> np.ndarray:
    lg = np.asarray(logits, np.float64)
    pr = np.exp(lg - lg.max(-1, keepdims=True))
    return pr / pr.sum(-1, keepdims=True)


def twohot_rounding(logits, bins):
    """Per-row float32 rounding bound of a two-hot expectation sum_j p_j b_j: the
    products' rounding plus a K-term sum, 2 sqrt(K) eps32 sum_j |p_j b_j| (a vectorised
    or pairwise sum: the error grows like sqrt(K), not K). [..., K] -> [...]."""
    probs = jax.nn.softmax(jnp.asarray(logits, jnp.float32), -1)
    mag = jnp.sum(probs * jnp.abs(bins), -1)
    return 2 * np.sqrt(np.shape(logits)[-1]) * EPS32 * mag


def twohot_rms(logits, bins):
    """Typical (not worst-case) float32 rounding of a two-hot expectation: each product
    p_j b_j is rounded once and passes about log2(K) additions, each rounding with a
    random sign at the scale of the term, so the error is about
    eps32 * sqrt(sum_j (p_j b_j)^2) * sqrt(log2 K + 1). Measured on the plain, image and
    continuous fixtures: ours and the reference's jitted pair sums differ by at most 0.87
    of it (median 0.1-0.27), against at most 0.016 of `twohot_rounding`. [..., K] -> [...]."""
    probs = jax.nn.softmax(jnp.asarray(logits, jnp.float32), -1)
    k = np.shape(logits)[-1]
    return EPS32 * jnp.sqrt(jnp.sum(jnp.square(probs * bins), -1)) * np.sqrt(np.log2(k) + 1)


def twohot_bound(logits, bins, sides: int = 2) -> Tol:
    """Two float32 evaluations of one expectation (ours and the reference's, each within
    `twohot_rounding` of the exact value) differ by at most twice the bound, per row."""
    bound = np.asarray(twohot_rounding(logits, bins), np.float64)
    return Tol(sides * bound + 1e-7, 1e-6,
               f"{sides} x two-hot rounding 2 sqrt(K) eps32 sum|p b|, per row")


def f64_mean_row(fx, name, logits, bins, cfg) -> Row:
    """Our default (exact) expectation against a float64 expectation of the same logits."""
    ours = np.asarray(jax.jit(nm.twohot_mean)(jnp.asarray(logits), bins), np.float64)
    exact = (_probs64(logits) * np.asarray(bins, np.float64)).sum(-1)
    return compare(fx, name + " (exact mean vs float64)", ours, exact,
                   twohot_bound(logits, bins, sides=1))


# ----------------------------------------------------------------------------- two-hot noise


# Rewards and values are two-hot expectations whose float32 sum carries rounding of the
# order of `twohot_rms` (at most `twohot_rounding`), in ours and in the reference's
# (differently compiled) pair sum. Everything computed from them (returns, advantages,
# critic targets, gradients, the next update) inherits that difference. To bound it
# without fitting, every check also runs DRAWS times with each expectation moved by a
# random +-2 x `twohot_rms` (two evaluations, each off by up to one), and an array's
# tolerance is widened by SPREAD_FACTOR x the largest change those draws caused in it,
# elementwise.
# Arrays that do not depend on a two-hot expectation do not move: their tolerance stays
# at the float32 level.
DRAWS = 3
SPREAD_FACTOR = 2.0
# SIGN_LIKE: the first RMS step is sign(g) * lr for every element, and the momentum
# 0.1 * sign(g). An element whose gradient is within the two-hot noise (`sign_undetermined`,
# from the draws' spread of the gradient itself, which is continuous) can flip by 2 lr
# (0.2), discontinuously, so a few draws of the parameters cannot find every such element.
# Those elements are compared apart, counted, and may move as far as any element of their
# tensor moved in the draws; every other element keeps its own elementwise tolerance.
# Such an element may also be flipped by float32 rounding alone: a gradient that is a sum
# with cancelling terms rounds differently on another CPU (AVX2 against AVX-512 orders the
# sum otherwise), and the draws, which move only the two-hot expectations, may leave its
# tensor still. Its allowance is therefore also the optimiser's own reach of a flip
# (`sign_flip_reach`), whichever is larger.
UNDETERMINED = ("sign of the gradient within the two-hot noise: the tensor's largest spread "
                "or the optimiser's reach of a flipped step")


def sign_flip_reach(lr: float, beta1: float, beta2: float, steps: int) -> tuple[float, float]:
    """(parameter, momentum mu) change of an element after `steps` updates from zero
    moments when the sign of its gradient flips at any of them.

    The RMS step u_t = g_t / sqrt(nu_hat_t) is at most sqrt((1 - beta2^t) / (1 - beta2))
    in size (nu_t >= (1 - beta2) g_t^2, nu_hat_t = nu_t / (1 - beta2^t)), so a flip changes
    it by at most twice that; mu = beta1 mu + (1 - beta1) u carries the change, and the
    parameter moves by lr mu / (1 - beta1^t) each step (warm-up and schedules only lower
    lr). Update 1: 2 lr and 0.2 (u_1 = sign(g))."""
    mu = param = 0.0
    for t in range(1, steps + 1):
        mu = beta1 * mu + (1 - beta1) * 2 * np.sqrt((1 - beta2 ** t) / (1 - beta2))
        param += lr * mu / (1 - beta1 ** t)
    return float(param), float(mu)


def module_lr(cfg: AgentConfig, name: str) -> float:
    """The learning rate of the module that owns the parameter `name` ('<module>/...')."""
    module = name.split("/", 1)[0]
    return getattr(cfg.lrs, module, cfg.opt.lr) if cfg.separate_lrs else cfg.opt.lr


class _Perturbation:
    seed = None  # a traced int32 while a perturbed function is traced; 0: no perturbation
    calls = 0
    unit = None  # twohot_rms or twohot_rounding


@contextlib.contextmanager
def _perturbed_expectations():
    original = agent_lib.twohot_expectation

    def expectation(cfg, logits, bins):
        mean = original(cfg, logits, bins)
        seed = _Perturbation.seed
        if seed is None:
            return mean
        _Perturbation.calls += 1
        key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(0), seed),
                                 _Perturbation.calls)
        sign = jax.random.rademacher(key, mean.shape, jnp.float32)
        amp = jnp.where(seed > 0, 2.0, 0.0).astype(jnp.float32)
        return mean + jax.lax.stop_gradient(amp * sign * _Perturbation.unit(logits, bins))

    agent_lib.twohot_expectation = expectation
    try:
        yield
    finally:
        agent_lib.twohot_expectation = original


def perturbed(fn, unit=twohot_rms):
    """jit(fn) with an extra trailing int32 seed: 0 computes fn itself, s > 0 the s-th draw
    of two-hot expectations moved by +-2 `unit`s."""

    def traced(*args):
        *args, seed = args
        _Perturbation.seed, _Perturbation.calls, _Perturbation.unit = seed, 0, unit
        try:
            return fn(*args)
        finally:
            _Perturbation.seed = None

    jitted = jax.jit(traced)

    def call(*args):
        with _perturbed_expectations():
            return jitted(*args)

    return call


def run_perturbed(fn, *args):
    """(fn(*args), spread): spread has fn's output structure, the elementwise largest
    |draw - base| over DRAWS draws."""
    run = perturbed(fn)
    base = run(*args, jnp.int32(0))
    return base, spread_of(base, [run(*args, jnp.int32(s)) for s in range(1, DRAWS + 1)])


def spread_of(base, draws: list):
    """Elementwise max |draw - base| over the draws, with base's tree structure."""
    spread = jax.tree.map(lambda x: np.zeros(np.shape(x)), base)
    for draw in draws:
        spread = jax.tree.map(
            lambda s, x, b: np.maximum(s, np.abs(np.asarray(x, np.float64)
                                                 - np.asarray(b, np.float64))),
            spread, draw, base)
    return spread


def widen(tol: Tol, spread) -> Tol:
    """tol plus SPREAD_FACTOR x the two-hot draws' spread, elementwise."""
    spread = np.asarray(spread, np.float64)
    if not spread.any():
        return tol
    return Tol(tol.atol + SPREAD_FACTOR * spread, tol.rtol,
               tol.why + f" + {SPREAD_FACTOR:g} x two-hot draws' spread")


# ----------------------------------------------------------------------------- f, i (world model)


Override = Callable[[AgentConfig], AgentConfig]


def check_wm(directory: str, name: str = "wm_loss.npz") -> list[Row]:
    fx = name
    sfx = suffix_of(name, "wm_loss")
    d = _load(os.path.join(directory, name))
    p = _load(os.path.join(directory, f"wm_params{sfx}.npz"))
    ypath = config_path(directory, "wm_config", sfx)
    cfg = config_from_yaml(ypath)
    spaces = spaces_from(d, "data_", p, yaml_spaces(ypath))
    params = nest(p, PREFIX)
    B = d["data_is_first"].shape[0]
    data = {
        "obs": _obs_batch(d, "data_", spaces), "action": d["data_action"],
        "reward": d["data_reward"], "is_first": d["data_is_first"],
        "is_last": d["data_is_last"], "is_terminal": d["data_is_terminal"],
    }
    carry = agent_lib.policy_initial(cfg, spaces, B)
    fn = jax.jit(lambda prm, dat, car: agent_lib.world_model(
        prm, cfg, spaces, dat, car, jax.random.PRNGKey(0)))
    wm = fn(params, data, carry)
    keys = (*spaces.dec_keys, "reward", "cont", "dyn", "rep")
    rows = [compare(fx, f"loss_{k}", wm["losses"][k], d[f"loss_{k}"], DEEP) for k in keys]
    scales = agent_lib.loss_scales(cfg, spaces)
    total = sum(scales[k] * wm["losses"][k].mean() for k in keys)
    rows.append(compare(fx, "total_scaled_wm", total, d["total_scaled_wm"], DEEP))
    post = wm["post"]
    prior = jax.jit(lambda pr, de: agent_lib.nets.prior_logit(pr, cfg.rssm, de))(
        params["dyn"], post["deter"])
    rows += [
        compare(fx, "diag_embed", wm["embed"], d["diag_embed"], TIGHT),
        compare(fx, "diag_deter", post["deter"], d["diag_deter"], DEEP),
        compare(fx, "diag_stoch", post["stoch"], d["diag_stoch"], TIGHT),
        compare(fx, "diag_post_logit", post["logit"], d["diag_post_logit"], DEEP),
        compare(fx, "diag_prior_logit", prior, d["diag_prior_logit"], DEEP),
        compare(fx, "diag_prevacts", wm["prevacts"], d["diag_prevacts"], TIGHT),
        compare(fx, "diag_cont_prob", nm.bernoulli_mean(wm["con_logit"]), d["diag_cont_prob"],
                DEEP),
        compare(fx, "diag_newlat_deter", wm["newlat"]["deter"], d["diag_newlat_deter"], DEEP),
        compare(fx, "diag_newlat_stoch", wm["newlat"]["stoch"], d["diag_newlat_stoch"], TIGHT),
    ]
    rows += _decoder_rows(fx, spaces, wm["dec"], d)
    bins = agent_lib.reward_bins(cfg)
    lg = wm["rew_logits"]
    rows += [
        compare(fx, "diag_reward_mean", nm.twohot_mean_pairsum(lg, bins), d["diag_reward_mean"],
                twohot_bound(lg, bins)),
        compare(fx, "diag_reward_mode", nm.twohot_mode(lg, bins), d["diag_reward_mode"],
                twohot_bound(lg, bins)),
        f64_mean_row(fx, "diag_reward_mean", lg, bins, cfg),
    ]
    return rows


def _decoder_rows(fx, spaces, dec: dict, d: dict) -> list[Row]:
    rows = []
    for k in spaces.dec_vector_keys:
        rows.append(compare(fx, f"diag_dec_{k}_mode", nm.symexp(dec[k]), d[f"diag_dec_{k}_mode"],
                            DEEP))
    for k in spaces.dec_image_keys:
        rows.append(compare(fx, f"diag_dec_{k}_mode", dec[k], d[f"diag_dec_{k}_mode"], DEEP))
    return rows


# ----------------------------------------------------------------------------- g, i, j (full loss)


def load_state(flat: dict, cfg: AgentConfig, prefix: str = PREFIX):
    tree = nest(flat, prefix)
    params = {k: tree[k] for k in agent_lib.MODULES}
    return agent_lib.AgentState(
        params=params,
        slow=tree["slowcritic"],
        opt_state=agent_lib.optimizer(cfg).init(params),
        retnorm=RetNormState(low=jnp.asarray(tree["retnorm"]["low"]["value"], jnp.float32),
                             high=jnp.asarray(tree["retnorm"]["high"]["value"], jnp.float32)),
        step=jnp.asarray(tree["opt"]["step"]["value"], jnp.int32),
        updates=jnp.asarray(tree["updater"]["updates"]["value"], jnp.int32),
        # valnorm / advnorm (when on): their variables, zeros at the start.
        norms={n: {k: jnp.asarray(tree.get(n, {}).get(k, {}).get("value", v), jnp.float32)
                   for k, v in state.items()}
               for n, state in agent_lib.norms_init(cfg).items()},
    )


def family(directory: str, sfx: str, arrays: dict, prefix: str, params: dict,
           override: Override | None = None):
    """(config, spaces, actor noise) of the `sfx` family, read from its files."""
    ypath = config_path(directory, "ac_config", sfx)
    cfg = config_from_yaml(ypath, twohot_mean="pairsum")
    if override is not None:
        cfg = override(cfg)
    spaces = spaces_from(arrays, prefix, params, yaml_spaces(ypath))
    loss_file = os.path.join(directory, f"ac_loss{sfx}.npz")
    noise = None
    if not spaces.act_discrete:
        if "diag_imag_action" in arrays:
            noise = actor_noise(arrays)
        elif os.path.exists(loss_file):  # an update file: its loss file has the actions
            noise = actor_noise(_load(loss_file))
        else:
            raise ValueError(f"a continuous-action fixture needs ac_loss{sfx}.npz beside it "
                             "to read how its actor sampled")
    return cfg, spaces, noise


VALUE_LIKE = ("adv/", "rew/", "val/", "ret/", "ret_normed/", "replay_ret/", "td_error",
              "pred_rew/", "actor_loss", "critic_loss", "replay_critic_loss",
              "rewstats/pred", "opt_loss", "opt_grad_norm")


# The loss fixture's arrays read from our loss outputs: (label, path in ours, tolerance).
_AC_ARRAYS = (
    ("replay_outs_deter", ("post", "deter"), DEEP),
    ("replay_outs_stoch", ("post", "stoch"), TIGHT),
    ("replay_outs_logit", ("post", "logit"), DEEP),
    ("prevacts_action", ("prevacts",), TIGHT),
    ("embed", ("embed",), TIGHT),
    ("carry_out_deter", ("carry", "deter"), DEEP),
    ("carry_out_stoch", ("carry", "stoch"), TIGHT),
    ("carry_out_action", ("carry", "action"), TIGHT),
    ("retnorm_after_low", ("retnorm", "low"), DEEP),
    ("retnorm_after_high", ("retnorm", "high"), DEEP),
    ("diag_imag_deter", ("diag", "traj", "deter"), DEEP),
    ("diag_imag_stoch", ("diag", "traj", "stoch"), TIGHT),
    ("diag_imag_logit", ("diag", "traj", "logit"), DEEP),
    ("diag_imag_action", ("diag", "acts"), TIGHT),
    ("diag_imag_cont", ("diag", "con"), DEEP),
    ("diag_imag_weight", ("diag", "weight"), DEEP),
    ("diag_ret", ("diag", "ret"), DEEP),
    ("diag_ret_offset", ("diag", "offset"), DEEP),
    ("diag_ret_scale", ("diag", "scale"), DEEP),
    ("diag_adv", ("diag", "adv"), DEEP),
    ("diag_logpi", ("diag", "logpi"), DEEP),
    ("diag_actor_ent", ("diag", "ent"), DEEP),
    ("diag_replay_boot", ("diag", "boot"), DEEP),
    ("diag_replay_ret", ("diag", "replay_ret"), DEEP),
)


def check_ac(directory: str, name: str = "ac_loss.npz", override: Override | None = None
             ) -> list[Row]:
    fx = name
    sfx = suffix_of(name, "ac_loss")
    d = _load(os.path.join(directory, name))
    p = _load(os.path.join(directory, f"ac_params{sfx}.npz"))
    cfg, spaces, noise = family(directory, sfx, d, "data_", p, override)
    state = load_state(p, cfg)
    carry, data = agent_lib.split_context(cfg, spaces, batch_from(d, "data_", spaces))

    def loss(s, dat, car):
        total, aux = agent_lib.loss_fn(s.params, s.slow, s.retnorm, cfg, spaces, dat, car,
                                       jax.random.PRNGKey(0))
        aux = dict(aux)
        aux["total"] = total
        return aux

    with deterministic_actor(noise):
        out, spread = run_perturbed(loss, state, data, carry)
    cbins = agent_lib.critic_bins(cfg)

    def c(label, get, ref, tol):
        return compare(fx, label, get(out), ref, widen(tol, get(spread)))

    rows = [compare(fx, f"carry_in_{k}", carry[k], d[f"carry_in_{k}"], TIGHT)
            for k in ("deter", "stoch", "action")]
    for k in (*spaces.dec_keys, "reward", "cont", "dyn", "rep", "actor", "critic",
              "replay_critic"):
        rows.append(c(f"loss_{k}", lambda o, k=k: o["losses"][k], d[f"loss_{k}"], DEEP))
    rows.append(c("loss_total", lambda o: o["total"], d["loss_total"], DEEP))
    for label, path, tol in _AC_ARRAYS:
        rows.append(c(label, lambda o, path=path: _at(o, path), d[label], tol))
    diag = out["diag"]
    rows += _twohot_decode_rows(fx, cfg, state, diag, d)
    rows += [f64_mean_row(fx, "diag_imag_val", diag["critic_logits"], cbins, cfg),
             f64_mean_row(fx, "diag_imag_slowval", diag["slow_logits"], cbins, cfg)]
    if spaces.act_discrete:
        rows.append(c("diag_imag_actor_probs", lambda o: jax.nn.softmax(o["diag"]["adist"], -1),
                      d["diag_imag_actor_probs"], DEEP))
    else:
        rows += [c("diag_imag_actor_mean", lambda o: o["diag"]["adist"][0],
                   d["diag_imag_actor_mean"], DEEP),
                 c("diag_imag_actor_std", lambda o: o["diag"]["adist"][1],
                   d["diag_imag_actor_std"], DEEP)]
    rows += _decoder_rows(fx, spaces, out["dec"], d)
    rows += _metric_rows(fx, out["metrics"], spread["metrics"],
                         {k[4:]: d[k] for k in d if k.startswith("met_")})
    return rows


def _twohot_decode_rows(fx: str, cfg, state, diag: dict, d: dict) -> list[Row]:
    """Two-hot decodes: ours and the reference's pair sums each within their rounding."""
    cbins = agent_lib.critic_bins(cfg)
    rows = []
    for label, key, logits, bins in (
        ("diag_imag_reward", "rew", None, agent_lib.reward_bins(cfg)),
        ("diag_imag_val", "val", diag["critic_logits"], cbins),
        ("diag_imag_slowval", "slowval", diag["slow_logits"], cbins),
    ):
        if logits is None:  # index 0 is the data reward, 1..H the reward head's decode
            logits = jax.jit(lambda prm, x: agent_lib.reward_logits(prm, cfg, x))(
                state.params["rew"], agent_lib.nets.feat(diag["traj"]))
        tol = twohot_bound(logits, bins)
        if key == "rew":
            tol = dataclasses.replace(tol, atol=np.asarray(tol.atol).copy())
            tol.atol[:, 0] = DEEP.atol
        # Not widened by the draws: they move exactly these values (by up to 2 bounds).
        rows.append(compare(fx, label, diag[key], d[label], tol))
    return rows


def _at(tree, path):
    for p in path:
        tree = tree[p] if isinstance(tree, dict) else getattr(tree, p)
    return tree


def _metric_tol(name: str) -> Tol:
    if name == "opt_update_norm":
        # The global update norm includes the nu-underflow elements (UNDERFLOW), whose step
        # lr * g * 1e20 is ~80x a normal step, so their rounding shows here (measured 2.5e-3).
        return Tol(1e-6, 1e-2, "includes nu-underflow elements' steps (UNDERFLOW)")
    return DEEP


def _metric_rows(fx, ours: dict, spread: dict, ref: dict) -> list[Row]:
    rows = []
    for name in sorted(ref):
        if name not in ours:
            rows.append(missing(fx, f"met/{name}"))
            continue
        rows.append(compare(fx, f"met/{name}", ours[name], ref[name],
                            widen(_metric_tol(name), spread[name])))
    return rows


# ----------------------------------------------------------------------------- h, i, j (updates)


def check_update(directory: str, name: str = "update.npz", override: Override | None = None,
                 runs: tuple[str, ...] = ("", "ema_"), steps: int = 2) -> list[Row]:
    fx = name
    sfx = suffix_of(name, "update")
    flat = _load(os.path.join(directory, name))
    start = {k[len("u0/state/"):]: v for k, v in flat.items() if k.startswith("u0/state/")}
    cfg, spaces, noise = family(directory, sfx, flat, "b1_data_", start, override)
    batches = [batch_from(flat, f"b{i}_data_", spaces) for i in (1, 2)][:steps]

    train = update_step(cfg, spaces, data_devices_of(name))

    # Compiled once for both runs, both steps and every draw. The first RMS step is
    # discontinuous in g (SIGN_LIKE), and the reference's flips of update 1 carry into
    # everything of update 2, so the update's draws use the worst-case rounding bound:
    # they must flip every element that a float32 evaluation could flip. Measured: with
    # the typical rounding instead, 3 update-2 moments of the image fixture fell outside.
    step = perturbed(train, unit=twohot_rounding)
    rows = []
    for run in runs:
        state0 = load_state(start, cfg)
        if run == "ema_":
            state0 = state0.replace(updates=jnp.ones((), jnp.int32))
        draws = []  # draws[seed][i]: the arrays after update i + 1 of that draw
        with deterministic_actor(noise):
            for seed in range(DRAWS + 1):
                state, arrays = state0, []
                for batch in batches:
                    state, out = step(state, batch, jnp.int32(seed))
                    arrays.append(out)
                draws.append(arrays)
        undetermined: dict = {}
        for i, base in enumerate(draws[0]):
            spread = spread_of(base, [dr[i] for dr in draws[1:]])
            undetermined = {k: undetermined.get(k, False) | sign_undetermined(g, spread["grads"][k])
                            for k, g in base["grads"].items()}
            rows += _state_rows(fx, f"{run}u{i + 1}/", base, spread, flat, undetermined, cfg)
    return rows


def update_step(cfg, spaces, devices: int, arrays: Callable | None = None) -> Callable:
    """train(state, batch) -> (state, arrays): one update as a fixture's train step ran it
    (gradients, then the optimiser), data-parallel on `devices` devices when more than one.
    arrays(state, outs, mets) -> dict names what the check compares (default
    `_update_arrays`); `grads` (flat, averaged over the devices) is added to it."""
    axis = DATA_AXIS if devices > 1 else None
    arrays = _update_arrays if arrays is None else arrays

    def train(state, batch):
        key = jax.random.PRNGKey(0)
        # The update's own gradients (one backward pass in the compiled check).
        total, aux, grads = agent_lib.gradients(state, cfg, spaces, batch, key, axis)
        state, outs, mets = agent_lib.apply_gradients(state, cfg, total, aux, grads, axis)
        if axis is not None:  # the gradients the optimiser saw, for sign_undetermined
            grads = jax.tree.map(lambda g: jax.lax.pmean(g, axis), grads)
        return state, dict(arrays(state, outs, mets), grads=flatten(grads))

    return on_devices(train, devices) if devices > 1 else train


DATA_AXIS = "data"


def data_parallel(fn: Callable, devices: int) -> Callable:
    """fn(state, batch) -> (state, arrays) run as the reference's data-parallel train step
    runs it (jaxagent.py:337-343 @29eb964): the batch split over `devices` devices along its
    first axis, the state the same on each, fn called per device with DATA_AXIS bound.
    Returns (the state, which every device holds alike, as device 0's; the arrays of every
    device, stacked on a new leading axis [devices, ...])."""
    from jax.sharding import PartitionSpec as P

    # The default backend's devices, else the host's (`dreamerjax parity` adds host devices
    # for these files, so a machine with one GPU checks them on its CPU).
    avail = jax.devices() if jax.device_count() >= devices else jax.devices("cpu")
    if len(avail) < devices:
        raise ValueError(f"a {devices}-device fixture needs {devices} JAX devices, "
                         f"{len(avail)} are visible (on a CPU: XLA_FLAGS="
                         f"--xla_force_host_platform_device_count={devices})")
    mesh = jax.sharding.Mesh(np.array(avail[:devices]), (DATA_AXIS,))

    def per_device(state, batch):
        state, arrays = fn(state, batch)
        return state, jax.tree.map(lambda x: jnp.asarray(x)[None], arrays)

    # check_vma off: the averaged gradients keep the state alike on every device, which
    # JAX cannot prove; out_specs P() then takes device 0's copy, as the reference's.
    return jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(DATA_AXIS)),
                         out_specs=(P(), P(DATA_AXIS)), check_vma=False)


def data_devices_of(name: str) -> int:
    """The devices a fixture's update ran on: N for a `dpN` file, else 1."""
    match = re.search(r"(?:^|_)dp(\d+)(?:_|\.)", name)
    return int(match.group(1)) if match else 1


def on_devices(train: Callable, devices: int) -> Callable:
    """A check's train(state, batch) -> (state, arrays) run data-parallel, its arrays laid
    out as the reference's data-parallel train step returns them (jaxagent.py:341-343
    @29eb964): the replay write-back and the carry sharded, so every device's rows in batch
    order; everything else mirrored, so device 0's (its metrics are its own half's)."""
    run = data_parallel(train, devices)

    def gathered(state, batch):
        state, arrays = run(state, batch)
        out = {k: jax.tree.map(lambda x: x[0], v) for k, v in arrays.items()}
        for k in ("replay", "carry"):
            out[k] = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), arrays[k])
        return state, out

    return gathered


def sign_undetermined(grad, spread) -> np.ndarray:
    """Gradient elements whose sign the two-hot draws could flip: |g| <= SPREAD_FACTOR x
    the draws' spread of g. Their first RMS step sign(g) * lr (and momentum 0.1 sign(g))
    is not determined by float32; once undetermined, an element stays so in later steps."""
    return np.abs(np.asarray(grad, np.float64)) < SPREAD_FACTOR * np.asarray(spread)


def _update_arrays(state, outs, mets) -> dict:
    """The arrays of one train step that the fixture stores, by our names."""
    nu, mu, rms_count, mom_count = opt_moments(state.opt_state)
    return dict(params=flatten(state.params), slow=flatten(state.slow), rms_nu=flatten(nu),
                mom_mu=flatten(mu), rms_count=rms_count, mom_count=mom_count,
                step=state.step, updates=state.updates, low=state.retnorm.low,
                high=state.retnorm.high, replay=outs["replay"], carry=outs["carry"],
                metrics=mets, norms=state.norms)


def _split(fx, label, value, sp, ref, tol, under, flip, reach: float = 0.0) -> list[Row]:
    """One tensor's rows: the ordinary elements at `tol` widened by the draws' spread; the
    reference's nu-underflow elements (UNDERFLOW) and the sign-undetermined ones apart,
    those at the larger of the draws' largest spread and `reach` (`sign_flip_reach`)."""
    value, ref, sp = np.asarray(value), np.asarray(ref), np.asarray(sp)
    base, wide = tol, widen(tol, sp)
    if np.ndim(wide.atol):
        wide = dataclasses.replace(wide, atol=np.where(under | flip, 0.0, wide.atol))
    rows = [compare(fx, label, np.where(under | flip, ref, value), ref, wide)]
    if under.any():
        rows.append(compare(fx, f"{label} [{int(under.sum())} nu-underflow elems]",
                            value[under], ref[under], UNDERFLOW))
    if flip.any():  # SIGN_LIKE: as far as any element of the tensor moved in the draws
        atol = np.broadcast_to(np.asarray(base.atol), ref.shape)[flip]
        pooled = widen(dataclasses.replace(base, atol=atol, why=base.why + "; " + UNDETERMINED),
                       np.full(int(flip.sum()), max(float(sp.max()), reach)))
        rows.append(compare(fx, f"{label} [{int(flip.sum())} sign-undetermined elems]",
                            value[flip], ref[flip], pooled))
    return rows


# The update fixture's optimiser, normaliser, replay and carry arrays: (label, path in
# ours, name in the reference's state, tolerance).
_STATE_ARRAYS = (
    ("rms_count", ("rms_count",), "state/optstate/rms_count", TIGHT),
    ("mom_count", ("mom_count",), "state/optstate/mom_count", TIGHT),
    ("opt/step", ("step",), "state/agent/opt/step/value", TIGHT),
    ("updater/updates", ("updates",), "state/agent/updater/updates/value", TIGHT),
    ("retnorm/low", ("low",), "state/agent/retnorm/low/value", DEEP),
    ("retnorm/high", ("high",), "state/agent/retnorm/high/value", DEEP),
    ("replay/deter", ("replay", "deter"), "replay/deter", DEEP),
    ("replay/stoch", ("replay", "stoch"), "replay/stoch", TIGHT),
    ("carry/deter", ("carry", "deter"), "carry/deter", DEEP),
    ("carry/stoch", ("carry", "stoch"), "carry/stoch", TIGHT),
    ("carry/action", ("carry", "action"), "carry/action", TIGHT),
)


def _state_rows(fx, pre, ours: dict, spread: dict, flat, undetermined: dict,
                cfg: AgentConfig) -> list[Row]:
    rows = []
    prior = [pre] if pre.endswith("u1/") else [pre.replace("u2/", "u1/"), pre]

    def reach(name, moment):  # a flipped element's change in the parameter or in mu
        param, mu = sign_flip_reach(module_lr(cfg, name), cfg.opt.beta1, cfg.opt.beta2,
                                    len(prior))
        return mu if moment else param

    def ref_key(tag, name):
        key = f"{pre}state/optstate/{tag}/agent/{name}"
        return key if key in flat else f"{pre}state/optstate/{tag}/{name}"

    def split_rows(label, name, value, sp, ref, tol, sign_like=False):
        """Elements whose squared gradient underflows float32 in the reference (nu == 0
        with a nonzero momentum) take the update g / eps = g * 1e20, which amplifies the
        gradient's last-ulp rounding; they are compared apart (UNDERFLOW) and counted."""
        under = np.zeros(np.shape(ref), bool)
        for p in prior:  # an element that underflowed once carries it in its moments
            nu_key = ref_key("rms_nu", name).replace(pre, p, 1)
            under |= (np.asarray(flat[nu_key]) == 0) & (
                np.asarray(flat[ref_key("mom_mu", name).replace(pre, p, 1)]) != 0)
        flip = undetermined[name] & ~under if sign_like else np.zeros(np.shape(ref), bool)
        return _split(fx, label, value, sp, ref, tol, under, flip,
                      reach(name, label.startswith(pre + "mom_mu/")))

    for name, value in sorted(ours["params"].items()):
        rows += split_rows(f"{pre}{name}", name, value, spread["params"][name],
                           flat[f"{pre}state/agent/{name}"], PARAMS, sign_like=True)
    for name, value in sorted(ours["slow"].items()):
        rows += split_rows(f"{pre}slowcritic/{name}", f"critic/{name}", value,
                           spread["slow"][name], flat[f"{pre}state/agent/slowcritic/{name}"],
                           PARAMS, sign_like=True)
    for tag in ("rms_nu", "mom_mu"):
        for name, value in sorted(ours[tag].items()):
            ref = flat[ref_key(tag, name)]
            rows += split_rows(f"{pre}{tag}/{name}", name, value, spread[tag][name], ref,
                               _moment_tol(np.abs(ref).max()), sign_like=tag == "mom_mu")

    def c(label, key, ref_name, tol):
        value, sp = _at(ours, key), _at(spread, key)
        return compare(fx, f"{pre}{label}", value, flat[f"{pre}{ref_name}"], widen(tol, sp))

    rows += [c(*row) for row in _STATE_ARRAYS]
    for norm, entries in ours["norms"].items():  # valnorm / advnorm, when on
        rows += [c(f"{norm}/{k}", ("norms", norm, k), f"state/agent/{norm}/{k}/value", DEEP)
                 for k in entries]
    ref_mets = {k[len(pre) + 4:]: flat[k] for k in flat if k.startswith(pre + "met/")}
    rows += _metric_rows(fx, ours["metrics"], spread["metrics"], ref_mets)
    return rows


# ----------------------------------------------------------------------------- registry


def _rows(fn):
    def check(path):
        return fn(str(path.parent), path.name)
    return check


def _register() -> None:
    from dreamerjax.tools.parity.fixtures import register, register_companion

    register("wm_loss*.npz", _rows(check_wm))
    register("ac_loss*.npz", _rows(check_ac))
    register("update*.npz", _rows(check_update))
    for pattern in ("wm_params*.npz", "ac_params*.npz"):
        register_companion(pattern)


_register()


__all__ = ["check_ac", "check_update", "check_wm"]
