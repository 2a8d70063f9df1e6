"""Parity of the agent against the reference fixtures f (world model), g (full loss) and
h (two train steps), README sections f-h of tests/data/reference.

Our parameter paths equal the reference's without the `agent/` prefix, so the name map is
`agent/<module>/<path>` -> params[module][path...]; `agent/slowcritic/...` is our `slow`.
The fixtures replaced latent and action sampling by the mode with the straight-through
gradient; `AgentConfig.sample_mode` is our switch for the same.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from dreamerjax import agent as agent_lib
from dreamerjax import numerics as nm
from dreamerjax import records
from dreamerjax.config import AgentConfig, tiny_agent_config
from dreamerjax.normalize import RetNormState
from dreamerjax.optim import opt_moments

PREFIX = "agent/"


@dataclass(frozen=True)
class Tol:
    """Pass when |ours - ref| <= atol + rtol * |ref| elementwise; `why` says where it comes
    from (float32 rounding of a computation of this depth, unless stated otherwise)."""

    atol: float
    rtol: float
    why: str = "float32"
    normwise: float = 0.0  # extra atol as a fraction of max |ref| over the whole array


# Float32-level tolerances, by kind of quantity. A forward pass through a dozen layers and a
# 12-step scan accumulates a few ulps per op, so 1e-5 relative covers it with margin while
# any real formula difference (a missing term, a wrong sign, a different reduction) is
# orders of magnitude larger.
TIGHT = Tol(1e-6, 1e-5, "float32, shallow computation")
DEEP = Tol(1e-5, 1e-4, "float32 through the RSSM scan and heads")
PARAMS = Tol(1e-7, 1e-6, "float32; one update moves params by <= lr = 4e-5")
PARAMS_D1 = Tol(4e-7, 1e-6, "update 2 of the plain fixtures: the step (<= lr) inherits the "
                "moments' D1 difference; 1% of lr")
UNDERFLOW = Tol(0.0, 5e-2, "g^2 underflows float32: update = g * 1e20 amplifies rounding "
                "of a ~1e-20 gradient; measured 5.7e-4 and 1.4e-2 in two builds")


def _moment_tol(centered: bool, pre: str) -> Tol:
    """Optimiser moments hold gradients; elementwise they suffer cancellation (a sum over
    the batch of terms of both signs), so a normwise term (fraction of the array's largest
    element) is added. Update 2 of the plain fixtures trains on returns and values whose
    reference two-hot decode carries O(1) noise on ~1e6 (D1), which reaches the critic and,
    through the replay critic, the RSSM gradients. That difference is chaotic: two builds of
    ours that differ only in the summation order of one RSSM layer measured normwise 4.1e-3
    and 6.1e-3 at most (critic output kernel), against <= 1e-5 in the centered fixtures,
    where the same update-2 code is checked tightly."""
    if not centered and "u2" in pre:
        return Tol(1e-6, 1e-4, "float32 + reference two-hot noise in update 2 (D1)",
                   normwise=2e-2)
    return Tol(1e-6, 1e-4, "float32; gradients with cancellation", normwise=1e-5)


def nest(flat: dict, prefix: str) -> dict:
    """{'agent/dyn/dyn0/kernel': x} -> {'dyn': {'dyn0': {'kernel': x}}} for keys under prefix."""
    out: dict = {}
    for key, value in flat.items():
        if not key.startswith(prefix):
            continue
        parts = key[len(prefix):].split("/")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = jnp.asarray(value)
    return out


def flatten(tree: dict) -> dict:
    """params[module][...] -> {'module/.../kernel': array}, the reference's key layout."""
    return records.flatten(tree, "/")


def fixture_config(directory: str, name: str) -> AgentConfig:
    """The tiny agent config of the fixtures, read from its yaml so other fixture folders
    with the same format but other sizes work too."""
    with open(os.path.join(directory, name)) as f:
        y = yaml.safe_load(f)
    r = y["dyn"]["rssm"]
    cfg = tiny_agent_config(sample_mode=True)
    rep = dataclasses.replace
    cfg = rep(
        cfg,
        rssm=rep(cfg.rssm, deter=r["deter"], hidden=r["hidden"], classes=r["classes"],
                 stoch=r["stoch"], blocks=r["blocks"], unimix=r["unimix"]),
        enc=rep(cfg.enc, units=y["enc"]["simple"]["units"], layers=y["enc"]["simple"]["layers"]),
        dec=rep(cfg.dec, units=y["dec"]["simple"]["units"], layers=y["dec"]["simple"]["layers"]),
        rewhead=rep(cfg.rewhead, units=y["rewhead"]["units"], layers=y["rewhead"]["layers"]),
        conhead=rep(cfg.conhead, units=y["conhead"]["units"], layers=y["conhead"]["layers"]),
        actor=rep(cfg.actor, units=y["actor"]["units"], layers=y["actor"]["layers"]),
        critic=rep(cfg.critic, units=y["critic"]["units"], layers=y["critic"]["layers"]),
        opt=rep(cfg.opt, warmup=int(y["opt"]["warmup"]), lr=float(y["opt"]["lr"])),
        horizon=int(y["horizon"]),
        imag_length=int(y["imag_length"]),
    )
    return cfg


SPACES = agent_lib.Spaces(obs_shape=(4,), act_discrete=True, act_dim=2)


def _spaces(data) -> agent_lib.Spaces:
    return agent_lib.Spaces(obs_shape=(data.shape[-1],), act_discrete=True, act_dim=2)


@dataclass
class Row:
    fixture: str
    array: str
    max_abs: float
    max_rel: float
    tol: str
    passed: bool
    note: str = ""


def compare(fixture: str, name: str, ours, ref, tol: Tol, note: str = "") -> Row:
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        return Row(fixture, name, np.inf, np.inf, f"shape {ours.shape} vs {ref.shape}", False)
    diff = np.abs(ours - ref)
    both_nan = np.isnan(ours) & np.isnan(ref)
    diff = np.where(both_nan, 0.0, diff)
    rel = diff / np.maximum(np.abs(ref), 1e-30)
    scale = float(np.nanmax(np.abs(ref))) if ref.size else 0.0
    ok = bool(np.all(diff <= tol.atol + tol.normwise * scale + tol.rtol * np.abs(ref)))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(np.where(diff == 0, 0.0, rel).max()) if diff.size else 0.0
    desc = f"atol {tol.atol:g} + rtol {tol.rtol:g}"
    desc += f" + {tol.normwise:g}*max|ref|" if tol.normwise else ""
    desc += f" ({tol.why})"
    return Row(fixture, name, max_abs, max_rel, desc, ok, note)


# ----------------------------------------------------------------------------- f


def check_wm(directory: str) -> list[Row]:
    fx = "wm_loss.npz"
    d = np.load(os.path.join(directory, "wm_loss.npz"))
    p = np.load(os.path.join(directory, "wm_params.npz"))
    cfg = fixture_config(directory, "wm_config.yaml")
    params = nest(dict(p), PREFIX)
    spaces = _spaces(d["data_vector"])
    B = d["data_vector"].shape[0]
    data = {
        "obs": d["data_vector"], "action": d["data_action"], "reward": d["data_reward"],
        "is_first": d["data_is_first"], "is_last": d["data_is_last"],
        "is_terminal": d["data_is_terminal"],
    }
    carry = agent_lib.policy_initial(cfg, spaces, B)
    fn = jax.jit(lambda prm, dat, car: agent_lib.world_model(
        prm, cfg, spaces, dat, car, jax.random.PRNGKey(0)))
    wm = fn(params, data, carry)
    bins = nm.twohot_bins(cfg.rewhead.bins)
    rows = []
    for k in ("vector", "reward", "cont", "dyn", "rep"):
        rows.append(compare(fx, f"loss_{k}", wm["losses"][k], d[f"loss_{k}"], DEEP))
    scales = agent_lib._loss_scales(cfg, spaces)
    total = sum(scales[k] * wm["losses"][k].mean() for k in ("vector", "reward", "cont",
                                                              "dyn", "rep"))
    rows.append(compare(fx, "total_scaled_wm", total, d["total_scaled_wm"], DEEP))
    post = wm["post"]
    rows += [
        compare(fx, "diag_embed", wm["embed"], d["diag_embed"], TIGHT),
        compare(fx, "diag_deter", post["deter"], d["diag_deter"], DEEP),
        compare(fx, "diag_stoch", post["stoch"], d["diag_stoch"], TIGHT),
        compare(fx, "diag_post_logit", post["logit"], d["diag_post_logit"], DEEP),
        compare(fx, "diag_prior_logit",
                jax.jit(lambda pr, de: agent_lib.nets.prior_logit(pr, cfg.rssm, de))(
                    params["dyn"], post["deter"]), d["diag_prior_logit"], DEEP),
        compare(fx, "diag_prevacts", wm["prevacts"], d["diag_prevacts"], TIGHT),
        compare(fx, "diag_dec_vector_mode", nm.symexp(wm["dec"]), d["diag_dec_vector_mode"],
                DEEP),
        compare(fx, "diag_cont_prob", nm.bernoulli_mean(wm["con_logit"]), d["diag_cont_prob"],
                DEEP),
        compare(fx, "diag_newlat_deter", wm["newlat"]["deter"], d["diag_newlat_deter"], DEEP),
        compare(fx, "diag_newlat_stoch", wm["newlat"]["stoch"], d["diag_newlat_stoch"], TIGHT),
    ]
    rows.append(_mean_row(fx, "diag_reward_mean", nm.twohot_mean(wm["rew_logits"], bins),
                          wm["rew_logits"], bins, d["diag_reward_mean"]))
    rows.append(_mean_row(fx, "diag_reward_mode", nm.twohot_mode(wm["rew_logits"], bins),
                          wm["rew_logits"], bins, d["diag_reward_mode"]))
    return rows


def _mean_row(fx, name, ours, logits, bins, ref_value) -> Row:
    """A two-hot expectation against the float64 expectation of the same logits. The
    reference's jitted value carries its reduction-order error (D1 in docs/deviations.md),
    so it is not the target; its deviation from float64 is printed beside ours."""
    exact = _f64_mean(logits, bins)
    ours = np.asarray(ours, np.float64)
    row = compare(fx, name + " (vs float64)", ours, exact, _sum_bound(logits, bins))
    ref_err = float(np.max(np.abs(np.asarray(ref_value, np.float64) - exact)))
    row.note = f"reference jitted value deviates from float64 by up to {ref_err:.3g}"
    return row


def _decode_row(fx, name, ours, logits, bins, ref) -> Row:
    """Our exact expectation against the reference's jitted one, with the tolerance that a
    float32 sum of K products p_j * b_j can reach: 2 sqrt(K) eps32 sum_j |p_j b_j|. Outer
    bins reach 4.85e8, so that is O(1) on the ~1e6 values of the plain fixtures (D1)."""
    return compare(fx, name + " (vs reference)", ours, ref, _sum_bound(logits, bins))


def _sum_bound(logits, bins) -> Tol:
    lg = np.asarray(logits, np.float64)
    pr = np.exp(lg - lg.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    mag = (pr * np.abs(np.asarray(bins, np.float64))).sum(-1)
    bound = 2 * np.sqrt(lg.shape[-1]) * 2.0**-24 * float(mag.max())
    return Tol(bound, 1e-5, "float32 two-hot summation bound 2 sqrt(K) eps max sum|p b|")


def _f64_mean(logits, bins):
    lg = np.asarray(logits, np.float64)
    lg = lg - lg.max(-1, keepdims=True)
    pr = np.exp(lg)
    pr /= pr.sum(-1, keepdims=True)
    return (pr * np.asarray(bins, np.float64)).sum(-1)


# ----------------------------------------------------------------------------- g, h


def load_state(flat: dict, cfg: AgentConfig, spaces, prefix: str = PREFIX):
    tree = nest(flat, prefix)
    params = {k: tree[k] for k in agent_lib.MODULES}
    state = agent_lib.AgentState(
        params=params,
        slow=tree["slowcritic"],
        opt_state=agent_lib.optimizer(cfg).init(params),
        retnorm=RetNormState(low=jnp.asarray(tree["retnorm"]["low"]["value"], jnp.float32),
                             high=jnp.asarray(tree["retnorm"]["high"]["value"], jnp.float32)),
        step=jnp.asarray(tree["opt"]["step"]["value"], jnp.int32),
        updates=jnp.asarray(tree["updater"]["updates"]["value"], jnp.int32),
    )
    return state


def batch_from(d, prefix: str) -> dict:
    return {
        "obs": d[prefix + "vector"], "action": d[prefix + "action"],
        "reward": d[prefix + "reward"], "is_first": d[prefix + "is_first"],
        "is_last": d[prefix + "is_last"], "is_terminal": d[prefix + "is_terminal"],
        "deter": d[prefix + "deter"], "stoch": d[prefix + "stoch"],
    }


def _value_tol(centered: bool, scale: float) -> Tol:
    """Predicted values, returns and metrics derived from them. In the plain fixtures the
    two-hot heads put mass on bins up to 4.85e8, values are ~1e6 and the reference's jitted
    two-hot mean differs from the exact one by O(1) (D1): relative tolerance there."""
    if centered:
        return Tol(1e-6 * scale, 1e-4, "float32; centered heads")
    return Tol(1e-6 * scale, 1e-4, "float32 relative; values ~1e6 carry the reference's "
               "O(1) two-hot noise (D1)")


def check_ac(directory: str, centered: bool = False) -> list[Row]:
    sfx = "_centered" if centered else ""
    fx = f"ac_loss{sfx}.npz"
    d = np.load(os.path.join(directory, fx))
    p = dict(np.load(os.path.join(directory, f"ac_params{sfx}.npz")))
    cfg = fixture_config(directory, "ac_config.yaml")
    spaces = _spaces(d["data_vector"])
    state = load_state(p, cfg, spaces)
    batch = batch_from(d, "data_")
    carry, data = agent_lib.split_context(cfg, spaces, batch)

    @jax.jit
    def run(state, data, carry):
        return agent_lib.loss_fn(state.params, state.slow, state.retnorm, cfg, spaces, data,
                                 carry, jax.random.PRNGKey(0))

    total, aux = run(state, data, carry)
    rows = [compare(fx, "carry_in_deter", carry["deter"], d["carry_in_deter"], TIGHT),
            compare(fx, "carry_in_stoch", carry["stoch"], d["carry_in_stoch"], TIGHT),
            compare(fx, "carry_in_action", carry["action"], d["carry_in_action"], TIGHT)]
    vt = _value_tol(centered, 1.0)
    bins = nm.twohot_bins(cfg.critic.bins)
    critic_tol = vt if centered else Tol(
        1e-6, 5e-4, "float32 + targets carry the reference's two-hot noise (D1, measured "
        "2.4e-4); exact with the reference's targets injected, row below")
    loss_tol = {"actor": vt, "critic": critic_tol, "replay_critic": vt, "reward": DEEP}
    for k in ("vector", "reward", "cont", "dyn", "rep", "actor", "critic", "replay_critic"):
        rows.append(compare(fx, f"loss_{k}", aux["losses"][k], d[f"loss_{k}"],
                            loss_tol.get(k, DEEP)))
    rows.append(compare(fx, "loss_total", total, d["loss_total"], vt))
    # The critic loss with the reference's own (noisy) targets injected: isolates the loss
    # formula from the two-hot decode of its targets (D1).
    w, ret_ref, slow_ref = (jnp.asarray(d[k]) for k in ("diag_imag_weight", "diag_ret",
                                                          "diag_imag_slowval"))
    lg = aux["diag"]["critic_logits"]
    pad = jnp.concatenate([ret_ref, jnp.zeros_like(ret_ref[:, -1:])], 1)
    inj = w[:, :-1] * -(nm.twohot_log_prob(lg, pad, bins)
                        + cfg.slowreg * nm.twohot_log_prob(lg, slow_ref, bins))[:, :-1]
    rows.append(compare(fx, "loss_critic (reference targets injected)", inj, d["loss_critic"],
                        DEEP))
    diag = aux["diag"]
    traj = diag["traj"]
    post = aux["post"]
    rows += [
        compare(fx, "replay_outs_deter", post["deter"], d["replay_outs_deter"], DEEP),
        compare(fx, "replay_outs_stoch", post["stoch"], d["replay_outs_stoch"], TIGHT),
        compare(fx, "replay_outs_logit", post["logit"], d["replay_outs_logit"], DEEP),
        compare(fx, "prevacts_action", aux["prevacts"], d["prevacts_action"], TIGHT),
        compare(fx, "embed", aux["embed"], d["embed"], TIGHT),
        compare(fx, "carry_out_deter", aux["carry"]["deter"], d["carry_out_deter"], DEEP),
        compare(fx, "carry_out_stoch", aux["carry"]["stoch"], d["carry_out_stoch"], TIGHT),
        compare(fx, "carry_out_action", aux["carry"]["action"], d["carry_out_action"], TIGHT),
        compare(fx, "retnorm_after_low", aux["retnorm"].low, d["retnorm_after_low"], vt),
        compare(fx, "retnorm_after_high", aux["retnorm"].high, d["retnorm_after_high"], vt),
        compare(fx, "diag_imag_deter", traj["deter"], d["diag_imag_deter"], DEEP),
        compare(fx, "diag_imag_stoch", traj["stoch"], d["diag_imag_stoch"], TIGHT),
        compare(fx, "diag_imag_logit", traj["logit"], d["diag_imag_logit"], DEEP),
        compare(fx, "diag_imag_action", diag["acts"], d["diag_imag_action"], TIGHT),
        compare(fx, "diag_imag_cont", diag["con"], d["diag_imag_cont"], DEEP),
        compare(fx, "diag_imag_weight", diag["weight"], d["diag_imag_weight"], DEEP),
        compare(fx, "diag_imag_reward", diag["rew"], d["diag_imag_reward"], vt),
        _decode_row(fx, "diag_imag_val", diag["val"], diag["critic_logits"], bins,
                    d["diag_imag_val"]),
        _decode_row(fx, "diag_imag_slowval", diag["slowval"], diag["slow_logits"], bins,
                    d["diag_imag_slowval"]),
        _mean_row(fx, "diag_imag_val", diag["val"], diag["critic_logits"], bins,
                  d["diag_imag_val"]),
        _mean_row(fx, "diag_imag_slowval", diag["slowval"], diag["slow_logits"], bins,
                  d["diag_imag_slowval"]),
        compare(fx, "diag_ret", diag["ret"], d["diag_ret"], vt),
        compare(fx, "diag_ret_offset", diag["offset"], d["diag_ret_offset"], vt),
        compare(fx, "diag_ret_scale", diag["scale"], d["diag_ret_scale"], vt),
        compare(fx, "diag_adv", diag["adv"], d["diag_adv"], _value_tol(centered, 1e-2)),
        compare(fx, "diag_logpi", diag["logpi"], d["diag_logpi"], DEEP),
        compare(fx, "diag_actor_ent", diag["ent"], d["diag_actor_ent"], DEEP),
        compare(fx, "diag_replay_boot", diag["boot"], d["diag_replay_boot"], vt),
        compare(fx, "diag_replay_ret", diag["replay_ret"], d["diag_replay_ret"], vt),
    ]
    rows += _metric_rows(fx, aux["metrics"], {k[4:]: d[k] for k in d.files
                                              if k.startswith("met_")}, centered)
    return rows


def _metric_tol(name: str, centered: bool) -> Tol:
    if name == "opt_update_norm":
        # The global update norm includes the nu-underflow elements (UNDERFLOW), whose step
        # lr * g * 1e20 is ~80x a normal step, so their rounding shows here (measured 2.5e-3).
        return Tol(1e-6, 1e-2, "includes nu-underflow elements' steps (UNDERFLOW)")
    value_like = ("adv/", "rew/", "val/", "ret/", "ret_normed/", "replay_ret/", "td_error",
                  "pred_rew/", "actor_loss", "critic_loss", "replay_critic_loss",
                  "rewstats/pred", "opt_loss", "opt_grad_norm")
    if name.startswith(value_like):
        return _value_tol(centered, 1.0)
    return DEEP


def _metric_rows(fx, ours: dict, ref: dict, centered: bool) -> list[Row]:
    rows = []
    for name in sorted(ref):
        if name not in ours:
            rows.append(Row(fx, f"met/{name}", np.inf, np.inf, "missing in ours", False))
            continue
        rows.append(compare(fx, f"met/{name}", ours[name], ref[name],
                            _metric_tol(name, centered)))
    return rows


def check_update(directory: str, centered: bool = False) -> list[Row]:
    sfx = "_centered" if centered else ""
    fx = f"update{sfx}.npz"
    u = np.load(os.path.join(directory, fx))
    flat = {k: u[k] for k in u.files}
    cfg = fixture_config(directory, "ac_config.yaml")
    spaces = _spaces(u["b1_data_vector"])
    upd = jax.jit(lambda s, b: agent_lib.update(s, cfg, spaces, b, jax.random.PRNGKey(0)))
    b1, b2 = batch_from(u, "b1_data_"), batch_from(u, "b2_data_")
    rows = []
    for run in ("", "ema_"):
        state = load_state({k[len("u0/state/"):]: v for k, v in flat.items()
                            if k.startswith("u0/state/")}, cfg, spaces)
        if run == "ema_":
            state = state.replace(updates=jnp.ones((), jnp.int32))
        for i, batch in ((1, b1), (2, b2)):
            state, outs, mets = upd(state, batch)
            pre = f"{run}u{i}/"
            rows += _state_rows(fx, pre, state, outs, mets, flat, centered)
    return rows


def _state_rows(fx, pre, state, outs, mets, flat, centered) -> list[Row]:
    rows = []
    ours_params = flatten(state.params)
    nu, mu, rms_count, mom_count = opt_moments(state.opt_state)
    prior = [pre] if pre.endswith("u1/") else [pre.replace("u2/", "u1/"), pre]

    def ref_key(tag, name):
        key = f"{pre}state/optstate/{tag}/agent/{name}"
        return key if key in flat else f"{pre}state/optstate/{tag}/{name}"

    def split_rows(label, name, ours, ref, tol):
        """Elements whose squared gradient underflows float32 in the reference (nu == 0
        with a nonzero update) take the update g / eps = g * 1e20, which amplifies the
        gradient's last-ulp rounding into visible differences; they are compared apart
        with a relative tolerance of 1e-2 and counted."""
        under = np.zeros(np.shape(ref), bool)
        for p in prior:  # an element that underflowed once carries it in its moments
            nu_key = ref_key("rms_nu", name).replace(pre, p, 1)
            under |= (np.asarray(flat[nu_key]) == 0) & (
                np.asarray(flat[ref_key("mom_mu", name).replace(pre, p, 1)]) != 0)
        ours, ref = np.asarray(ours), np.asarray(ref)
        out = [compare(fx, label, np.where(under, ref, ours), ref, tol)]
        if under.any():
            out.append(compare(fx, f"{label} [{int(under.sum())} nu-underflow elems]",
                               ours[under], ref[under], UNDERFLOW))
        return out

    pt = PARAMS_D1 if (not centered and "u2" in pre) else PARAMS
    for name, value in sorted(ours_params.items()):
        rows += split_rows(f"{pre}{name}", name, value, flat[f"{pre}state/agent/{name}"], pt)
    for name, value in sorted(flatten(state.slow).items()):
        rows += split_rows(f"{pre}slowcritic/{name}", f"critic/{name}", value,
                           flat[f"{pre}state/agent/slowcritic/{name}"], pt)
    mt = _moment_tol(centered, pre)
    for tag, tree in (("rms_nu", nu), ("mom_mu", mu)):
        for name, value in sorted(flatten(tree).items()):
            rows += split_rows(f"{pre}{tag}/{name}", name, value, flat[ref_key(tag, name)], mt)
    vt = _value_tol(centered, 1.0)
    rows += [
        compare(fx, f"{pre}rms_count", rms_count, flat[f"{pre}state/optstate/rms_count"], TIGHT),
        compare(fx, f"{pre}mom_count", mom_count, flat[f"{pre}state/optstate/mom_count"], TIGHT),
        compare(fx, f"{pre}opt/step", state.step, flat[f"{pre}state/agent/opt/step/value"],
                TIGHT),
        compare(fx, f"{pre}updater/updates", state.updates,
                flat[f"{pre}state/agent/updater/updates/value"], TIGHT),
        compare(fx, f"{pre}retnorm/low", state.retnorm.low,
                flat[f"{pre}state/agent/retnorm/low/value"], vt),
        compare(fx, f"{pre}retnorm/high", state.retnorm.high,
                flat[f"{pre}state/agent/retnorm/high/value"], vt),
        compare(fx, f"{pre}replay/deter", outs["replay"]["deter"], flat[f"{pre}replay/deter"],
                DEEP),
        compare(fx, f"{pre}replay/stoch", outs["replay"]["stoch"], flat[f"{pre}replay/stoch"],
                TIGHT),
        compare(fx, f"{pre}carry/deter", outs["carry"]["deter"], flat[f"{pre}carry/deter"],
                DEEP),
        compare(fx, f"{pre}carry/stoch", outs["carry"]["stoch"], flat[f"{pre}carry/stoch"],
                TIGHT),
        compare(fx, f"{pre}carry/action", outs["carry"]["action"], flat[f"{pre}carry/action"],
                TIGHT),
    ]
    ref_mets = {k[len(pre) + 4:]: flat[k] for k in flat if k.startswith(pre + "met/")}
    rows += _metric_rows(fx, mets, ref_mets, centered)
    return rows


# ----------------------------------------------------------------------------- registry


def _rows(fn):
    def check(path):
        return fn(str(path.parent))
    return check


def _register() -> None:
    from dreamerjax.parity.fixtures import register, register_companion

    register("wm_loss.npz", _rows(check_wm))
    register("ac_loss.npz", _rows(lambda d: check_ac(d, False)))
    register("ac_loss_centered.npz", _rows(lambda d: check_ac(d, True)))
    register("update.npz", _rows(lambda d: check_update(d, False)))
    register("update_centered.npz", _rows(lambda d: check_update(d, True)))
    for name in ("wm_params.npz", "wm_params_init.npz", "ac_params.npz",
                 "ac_params_centered.npz", "ac_params_init.npz"):
        register_companion(name)


_register()
