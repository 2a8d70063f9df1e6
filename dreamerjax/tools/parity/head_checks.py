"""Parity with the reference's HEAD (danijar/dreamerv3 at e3f0224) on its own arrays.

The fixture directory (the full set produced by the reference's HEAD, or the small-model
families in tests/data/reference_head) holds `head_loss{F}_s{d}.npz` (one jitted Agent.loss) and
`head_update{F}_s{d}.npz` (two jitted train steps) per family F; its README.md says how
they were produced. The version is read from each family's config yaml (HEAD's config has
`policy_dist_disc` and `repval_loss`, keys 29eb964 does not have), and the agent runs with
`reference = e3f0224`.

Rows, tolerances and the two-hot draws are those of the 29eb964 checks (agent_checks);
only the names (HEAD's state-dict layout, `NAME_MAP`) and the arrays differ.
"""

from __future__ import annotations

import dataclasses
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo import spaces as spaces_lib
from dreamerjax.algo.metrics_e3f0224 import E3F0224_LOSS_NAMES, E3F0224_OPT_NAMES
from dreamerjax.algo.normalize import RetNormState
from dreamerjax.algo.optim import opt_moments
from dreamerjax.config import dotted as config_dotted
from dreamerjax.config import resolve as config_resolve
from dreamerjax.config.defaults import HEAD_REF
from dreamerjax.tools.parity import agent_checks
from dreamerjax.tools.parity.agent_checks import (
    DEEP,
    PARAMS,
    TIGHT,
    Row,
    Tol,
    _moment_tol,
    _split,
    compare,
    missing,
    perturbed,
    run_perturbed,
    sign_flip_reach,
    sign_undetermined,
    spread_of,
    twohot_rounding,
    widen,
)
from dreamerjax.tools.parity.agent_fixtures import deterministic_actor, flatten
from dreamerjax.tools.parity.fixtures import INFO, as_info

NON_OBS = ("action", "reward", "is_first", "is_last", "is_terminal", "consec", "stepid")

# HEAD's parameter names -> ours (regex substitutions applied in order, on the path
# without the module). Norm scales are their own modules at HEAD (`<layer>norm/scale`,
# `mlp/norm<i>/scale`), ours sit inside their layer (`<layer>/norm/scale`).
MODULE_MAP = {"enc": "enc", "dyn": "dyn", "dec": "dec", "rew": "rew", "con": "con",
              "pol": "actor", "val": "critic", "slowval": "slow"}
NAME_MAP = (
    (r"^mlp/linear(\d+)/", r"h\1/"), (r"^mlp/norm(\d+)/scale$", r"h\1/norm/scale"),
    (r"^head/(logits|logit)/", "dist/out/"),
    (r"^head/action/(logits|mean)/", "action/out/"), (r"^head/action/stddev/", "action/std/"),
    (r"^dynhid(\d+)", r"dyn\1"), (r"^dyngru/", "dyncore/"), (r"^prior(\d+)", r"img\1"),
    (r"^priorlogit/", "imglogit/"), (r"^cnn(\d+)", r"conv\1"),
    (r"^sp0/", "space0/"), (r"^sp1norm/", "space1hidnorm/"), (r"^sp1/", "space1hid/"),
    (r"^sp2/", "space1/"), (r"^vec/(.+)/pred/", r"out_\1/out/"),
    (r"^([a-z0-9]+?)norm/scale$", r"\1/norm/scale"), (r"^sp/norm/scale$", "spacenorm/scale"),
)
DEC_MLP = ((r"^h(\d+)/", r"mlp\1/"),)  # the vector decoder's MLP is `mlp/` like a head's


def our_name(head_name: str) -> tuple[str, str] | None:
    """'pol/mlp/linear0/kernel' -> ('actor', 'h0/kernel'); None for non-parameters."""
    module, _, rest = head_name.partition("/")
    if module not in MODULE_MAP:
        return None
    for pattern, repl in NAME_MAP + (DEC_MLP if module == "dec" else ()):
        rest = re.sub(pattern, repl, rest)
    return MODULE_MAP[module], rest


def _load(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


def nest_head(flat: dict, prefix: str = "") -> dict:
    """HEAD's flat state -> {our module: nested params} (slow critic as 'slow')."""
    out: dict = {}
    for key, value in flat.items():
        if not key.startswith(prefix) or (mapped := our_name(key[len(prefix):])) is None:
            continue
        module, rest = mapped
        node = out.setdefault(module, {})
        parts = rest.split("/")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = jnp.asarray(value)
    return out


def is_head_config(y: dict) -> bool:
    """A config of HEAD: it has keys 29eb964's has not (configs.yaml @e3f0224)."""
    return "policy_dist_disc" in y and "repval_loss" in y


def config_from_head_yaml(path: str) -> agent_lib.AgentConfig:
    """The agent config of a HEAD fixture (its full agent config yaml)."""
    with open(path) as f:
        y = yaml.safe_load(f)
    if not is_head_config(y):
        raise ValueError(f"{os.path.basename(path)} is not a config of {HEAD_REF}")
    for key, want in (("policy_dist_disc", "categorical"), ("policy_dist_cont", "bounded_normal"),
                      ("ac_grads", False), ("repval_grad", True), ("reward_grad", True),
                      ("replay_context", 1), ("imag_last", 0)):
        if y[key] != want:
            raise ValueError(f"{os.path.basename(path)}: {key} = {y[key]!r} is not implemented")
    # HEAD's agent config holds the agent's keys without their `agent.` section.
    flat = {f"agent.{k}": v for k, v in config_dotted.load_file(path).items()}
    # HEAD's own order of the two-hot expectation (outs.py:285-309), as the 29eb964
    # checks use that version's.
    return dataclasses.replace(config_resolve.agent_from_reference(flat, HEAD_REF),
                               twohot_mean="pairsum", sample_mode=True)


def spaces_of(arrays: dict, prefix: str, params: dict) -> spaces_lib.Spaces:
    """Observation keys in HEAD's dict order (the files keep it), the action space from the
    stored action and the policy's output kernel."""
    obs = []
    for key, x in arrays.items():
        name = key[len(prefix):]
        if key.startswith(prefix) and "/" not in name and name not in NON_OBS:
            obs.append((name, tuple(x.shape[2:]), str(x.dtype)))
    action = arrays[prefix + "action"]
    discrete = bool(np.issubdtype(action.dtype, np.integer))
    out = params["actor"]["action"]["out"]["kernel"]
    return spaces_lib.Spaces(tuple(obs), discrete, int(out.shape[-1]))


def batch_of(d: dict, prefix: str, spaces) -> dict:
    """A replay batch as `agent.update` takes it. HEAD stores the context's stoch as a
    float one-hot; we store the class index, exact since the sample is an exact one-hot
    (checked here)."""
    onehot = d[prefix + "dyn/stoch"]
    index = onehot.argmax(-1).astype(np.int32)
    if not np.array_equal(np.eye(onehot.shape[-1], dtype=onehot.dtype)[index], onehot):
        raise ValueError(f"{prefix}dyn/stoch is not an exact one-hot")
    return {"obs": {k: d[prefix + k] for k in spaces.obs_keys}, "action": d[prefix + "action"],
            "reward": d[prefix + "reward"], "is_first": d[prefix + "is_first"],
            "is_last": d[prefix + "is_last"], "is_terminal": d[prefix + "is_terminal"],
            "deter": d[prefix + "dyn/deter"], "stoch": index}


def load_state(flat: dict, cfg, spaces_fn) -> agent_lib.AgentState:
    """Our state from HEAD's; raises unless every parameter maps onto ours, shape for
    shape (`spaces_fn(params)` gives the spaces to build ours with)."""
    tree = nest_head(flat)
    params = {k: tree[k] for k in agent_lib.MODULES}
    want = jax.eval_shape(lambda: agent_lib.init_params(
        jax.random.PRNGKey(0), cfg, spaces_fn(params)))
    got = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
    if jax.tree.structure(want) != jax.tree.structure(got) or jax.tree.leaves(want) != \
            jax.tree.leaves(got):
        ours = set(flatten(want))
        theirs = set(flatten(got))
        raise ValueError(f"HEAD's parameters do not map onto ours: only ours "
                         f"{sorted(ours - theirs)}, only HEAD's {sorted(theirs - ours)}")
    return agent_lib.AgentState(
        params=params, slow=tree["slow"], opt_state=agent_lib.optimizer(cfg).init(params),
        retnorm=RetNormState(low=jnp.asarray(flat["retnorm/lo/value"], jnp.float32),
                             high=jnp.asarray(flat["retnorm/hi/value"], jnp.float32)),
        step=jnp.asarray(flat["opt/step/value"], jnp.int32),
        updates=jnp.asarray(flat["slowval_count/value"], jnp.int32))


def family_of(directory: str, name: str, stem: str):
    """(family tag, draw tag, config, start-state file) of a HEAD fixture file."""
    m = re.fullmatch(rf"{stem}(.*)_(s\d+)\.npz", name)
    if not m:
        raise ValueError(f"{name}: not a {stem}<family>_s<draw>.npz file")
    fam, draw = m.groups()
    fam = re.sub(r"_dp\d+", "", fam)  # a data-parallel file shares its family's inputs
    cfg = config_from_head_yaml(os.path.join(directory, f"head_config{fam}_{draw}.yaml"))
    start_fam = fam.removesuffix("_eps")
    kind = "start" if start_fam.endswith("pert") else "init"
    return fam, draw, cfg, os.path.join(directory, f"head_params_{kind}{start_fam}_{draw}.npz")


def actor_noise_head(d: dict, spaces, prefix: str = "diag/") -> float | None:
    """The continuous policy's sample as mean + noise * std in the fixture (None:
    discrete). Measured from the imagined actions and the policy's mean and stddev."""
    if spaces.act_discrete:
        return None
    z = (d[prefix + "imag/act/action"].astype(np.float64) - d[prefix + "head/pol1/action/mean"]) / (
        d[prefix + "head/pol1/action/stddev"])
    noise = float(np.round(np.median(z), 3))
    if np.abs(z - noise).max() > 1e-3:
        raise ValueError("the fixture's continuous actions are not mean + constant * std")
    return noise


# ----------------------------------------------------------------------------- loss


# HEAD's metrics whose values come from the two-hot expectations (rewards, values, returns).
VALUE_METRICS = ("adv", "adv_std", "adv_mag", "rew", "ret", "val", "tar", "slowval",
                 "ret_min", "ret_max", "ret_rate", "loss/policy", "loss/value", "loss/repval")


def check_head_loss(directory: str, name: str, override=None) -> list[Row]:
    """The loss file's rows; `override` (cfg -> cfg) injects a change (mutation tests)."""
    fx = name
    fam, _, cfg, start = family_of(directory, name, "head_loss")
    cfg = cfg if override is None else override(cfg)
    d = _load(os.path.join(directory, name))
    state = load_state(_load(start), cfg, lambda prm: spaces_of(d, "data/", prm))
    spaces = spaces_of(d, "data/", state.params)
    carry, data = agent_lib.split_context(cfg, spaces, batch_of(d, "data/", spaces))

    def loss(s, dat, car):
        total, aux = agent_lib.loss_fn(s.params, s.slow, s.retnorm, cfg, spaces, dat, car,
                                       jax.random.PRNGKey(0))
        return dict(aux, total=total)

    with deterministic_actor(actor_noise_head(d, spaces)):
        out, spread = run_perturbed(loss, state, data, carry)

    def c(label, get, ref, tol, note=""):
        return compare(fx, label, get(out), ref, widen(tol, get(spread)), note)

    rows = [compare(fx, "ctx/carry/dyn/deter", carry["deter"], d["ctx/carry/dyn/deter"], TIGHT),
            compare(fx, "ctx/carry/dyn/stoch", carry["stoch"], d["ctx/carry/dyn/stoch"], TIGHT)]
    names = {v: k for k, v in E3F0224_LOSS_NAMES.items()}
    for key in sorted(k for k in d if k.startswith("loss/") and k != "loss/total"):
        ours = names.get(key[5:], key[5:])
        rows.append(c(key, lambda o, k=ours: o["unscaled"][k], d[key], DEEP))
    rows.append(c("loss/total", lambda o: o["total"], d["loss/total"], DEEP))
    for label, path, tol in (
        ("outs/tokens", ("embed",), TIGHT),
        ("outs/repfeat/deter", ("post", "deter"), DEEP),
        ("outs/repfeat/stoch", ("post", "stoch"), TIGHT),
        ("outs/repfeat/logit", ("post", "logit"), DEEP),
        ("carry_out/dyn/deter", ("carry", "deter"), DEEP),
        ("carry_out/dyn/stoch", ("carry", "stoch"), TIGHT),
        ("entries/dyn/deter", ("post", "deter"), DEEP),
        ("entries/dyn/stoch", ("post", "stoch"), TIGHT),
        ("state_after/retnorm/lo/value", ("retnorm", "low"), DEEP),
        ("state_after/retnorm/hi/value", ("retnorm", "high"), DEEP),
    ):
        rows.append(c(label, lambda o, path=path: _at(o, path), d[label], tol))
    rows += _diag_rows(fx, out, spread, d, spaces)
    ref = {k[4:]: d[k] for k in d if k.startswith("met/")}
    rows += _metric_rows(fx, "met/", out["metrics"], spread["metrics"], ref)
    return rows


def _at(tree, path):
    for p in path:
        tree = tree[p] if isinstance(tree, dict) else getattr(tree, p)
    return tree


def _diag_rows(fx, out, spread, d, spaces) -> list[Row]:
    """The instrumented intermediates: imagination index 0 is the start state."""
    rows = []

    def c(label, get, tol):
        return compare(fx, label, get(out["diag"]), d[label], widen(tol, get(spread["diag"])))

    for k, tol in (("deter", DEEP), ("stoch", TIGHT), ("logit", DEEP)):
        rows.append(c(f"diag/imagine/feat/{k}", lambda o, k=k: o["traj"][k][:, 1:], tol))
    act = (lambda o: jnp.argmax(o["acts"], -1)) if spaces.act_discrete else (
        lambda o: o["acts"])
    rows.append(c("diag/imag/act/action", act, TIGHT))
    for k in ("rew", "con", "val", "slowval", "weight", "ret"):
        rows.append(c(f"diag/imag/{k}", lambda o, k=k: o[k], DEEP))
    rows += [c("diag/imag/adv", lambda o: o["adv"], DEEP),
             c("diag/imag/logpi", lambda o: o["logpi"], DEEP),
             c("diag/imag/ent/action", lambda o: o["ent"], DEEP),
             c("diag/repl/boot", lambda o: o["boot"], DEEP),
             c("diag/repl/ret", lambda o: o["replay_ret"], DEEP)]
    for key in spaces.dec_keys:
        if f"diag/dec/{key}/pred" not in d:  # left out of the committed files (images)
            continue
        rows.append(compare(fx, f"diag/dec/{key}/pred", out["dec"][key],
                            d[f"diag/dec/{key}/pred"], widen(DEEP, spread["dec"][key])))
    return rows


def _metric_rows(fx, pre, ours: dict, spread: dict, ref: dict) -> list[Row]:
    rows = []
    for name in sorted(ref):
        key = E3F0224_OPT_NAMES.get(name, name)
        if key not in ours:
            rows.append(missing(fx, f"{pre}{name}"))
            continue
        tol = DEEP
        if name == "opt/update_rms":
            tol = Tol(1e-6, 1e-2, "includes nu-underflow elements' steps (UNDERFLOW)")
        rows.append(compare(fx, f"{pre}{name}", ours[key], ref[name], widen(tol, spread[key])))
    return rows


# ----------------------------------------------------------------------------- update


def _head_update_arrays(state, outs, mets) -> dict:
    """The arrays of one train step that a HEAD update fixture is compared on."""
    nu, mu, _, _ = opt_moments(state.opt_state)
    return dict(params=flatten(state.params), slow=flatten(state.slow), nu=flatten(nu),
                mu=flatten(mu), step=state.step, updates=state.updates,
                low=state.retnorm.low, high=state.retnorm.high, replay=outs["replay"],
                carry=outs["carry"], metrics=mets)


def check_head_update(directory: str, name: str) -> list[Row]:
    fx = name
    fam, draw, cfg, start = family_of(directory, name, "head_update")
    flat = _load(os.path.join(directory, name))
    state0 = load_state(_load(start), cfg, lambda prm: spaces_of(flat, "b1/data/", prm))
    spaces = spaces_of(flat, "b1/data/", state0.params)
    batches = [batch_of(flat, f"b{i}/data/", spaces) for i in (1, 2)]
    loss_file = os.path.join(directory, f"head_loss{fam}_{draw}.npz")
    noise = actor_noise_head(_load(loss_file), spaces) if not spaces.act_discrete else None
    train = agent_checks.update_step(cfg, spaces, agent_checks.data_devices_of(name),
                                     _head_update_arrays)
    step = perturbed(train, unit=twohot_rounding)
    draws = []
    with deterministic_actor(noise):
        for seed in range(agent_checks.DRAWS + 1):
            state, arrays = state0, []
            for batch in batches:
                state, out = step(state, batch, jnp.int32(seed))
                arrays.append(out)
            draws.append(arrays)
    rows, undetermined = [], {}
    for i, base in enumerate(draws[0]):
        spread = spread_of(base, [dr[i] for dr in draws[1:]])
        undetermined = {k: undetermined.get(k, False) | sign_undetermined(g, spread["grads"][k])
                        for k, g in base["grads"].items()}
        step_rows = _update_rows(fx, f"u{i + 1}/", base, spread, flat, undetermined, cfg,
                                 exclude_mean=noise == 0.0)
        if i > 0 and noise == 0.0:  # the mean head's round-off steps reach all of update 2
            step_rows = [as_info(r, U2_NOTE) for r in step_rows]
        rows += step_rows
    return rows


U2_NOTE = ("info only: HEAD's update 1 moved the policy mean by round-off steps of +-lr "
           "(fixture README, Numerics 4), which change update 2's imagination; the _eps "
           "family checks update 2 of the continuous path")


MEAN_NOTE = ("not compared: with the mode patch HEAD's policy-mean gradient is round-off "
             "(~1e-13) that its RMS step turns into +-lr (fixture README, Numerics 4); "
             "the _eps family checks this head")


GRAD_FLOOR = 1e-4
BETA1, BETA2 = 0.9, 0.999


def mu_rounding(flat: dict, hname: str, steps: int) -> np.ndarray:
    """Per-element bound on the first moment's float32 error after `steps` updates.

    A gradient element is a sum over the batch whose terms cancel; its float32 error is
    up to GRAD_FLOOR of the tensor's largest |g|, not of the element. The RMS step
    u = g / sqrt(nu_hat) divides that error by the element's own sqrt(nu_hat) (twice:
    g is in nu too), so an element with a tiny gradient carries a large error in u and in
    mu = beta1 mu + (1 - beta1) u. |g_t| is read from the reference's nu_t and nu_{t-1}
    (nu_t = beta2 nu_{t-1} + (1 - beta2) g_t^2)."""
    err, nu_prev = 0.0, 0.0
    for t in range(1, steps + 1):
        nu = flat[f"u{t}/state/opt/state/1/1/{hname}"].astype(np.float64)
        g = np.sqrt(np.maximum(nu - BETA2 * nu_prev, 0.0) / (1 - BETA2))
        nu_hat = nu / (1 - BETA2 ** t)
        with np.errstate(divide="ignore", invalid="ignore"):
            du = np.where(nu_hat > 0, 2 * GRAD_FLOOR * g.max() / np.sqrt(nu_hat), 0.0)
        err = BETA1 * err + (1 - BETA1) * np.minimum(du, 2.0)  # |u| error is at most 2
        nu_prev = nu
    return err


def _update_rows(fx, pre, ours, spread, flat, undetermined, cfg, exclude_mean) -> list[Row]:
    rows = []
    prior = [pre] if pre == "u1/" else ["u1/", pre]
    reach_param, reach_mu = sign_flip_reach(cfg.opt.lr, cfg.opt.beta1, cfg.opt.beta2,
                                            len(prior))  # e3f0224: one lr for all modules
    for key in sorted(k for k in flat if k.startswith(pre + "state/")):
        hname = key[len(pre + "state/"):]
        mapped = our_name(hname)
        if mapped is None:
            continue
        module, rest = mapped
        if exclude_mean and module == "actor" and rest.startswith("action/out/"):
            rows.append(Row(fx, key, None, None, "-", None, INFO, MEAN_NOTE))
            continue
        ours_name = rest if module == "slow" else f"{module}/{rest}"
        grad_name = f"critic/{rest}" if module == "slow" else ours_name
        tree = "slow" if module == "slow" else "params"
        under = np.zeros(flat[key].shape, bool)
        if module != "slow":
            for p in prior:
                under |= ((flat[f"{p}state/opt/state/1/1/{hname}"] == 0)
                          & (flat[f"{p}state/opt/state/2/1/{hname}"] != 0))
        flip = undetermined[grad_name] & ~under
        rows += _split(fx, key, ours[tree][ours_name], spread[tree][ours_name], flat[key],
                       PARAMS, under, flip, reach_param)
        if module == "slow":
            continue
        for tag, idx in (("nu", 1), ("mu", 2)):
            ref = flat[f"{pre}state/opt/state/{idx}/1/{hname}"]
            tol = _moment_tol(np.abs(ref).max())
            if tag == "mu":
                tol = Tol(tol.atol + mu_rounding(flat, hname, len(prior)), tol.rtol,
                          tol.why + f" + the RMS step's division of a {GRAD_FLOOR:g} x "
                          "max|g| gradient error by the element's sqrt(nu)")
            rows += _split(fx, f"{pre}{tag}/{hname}", ours[tag][ours_name],
                           spread[tag][ours_name], ref, tol, under,
                           flip if tag == "mu" else np.zeros(ref.shape, bool), reach_mu)

    def c(label, get, ref_key, tol):
        return compare(fx, f"{pre}{label}", get(ours), flat[pre + ref_key],
                       widen(tol, get(spread)))

    onehot = lambda x: jax.nn.one_hot(x, flat[pre + "outs/replay/dyn/stoch"].shape[-1])  # noqa: E731
    rows += [
        c("opt/step", lambda o: o["step"], "state/opt/step/value", TIGHT),
        c("slowval_count", lambda o: o["updates"], "state/slowval_count/value", TIGHT),
        c("retnorm/lo", lambda o: o["low"], "state/retnorm/lo/value", DEEP),
        c("retnorm/hi", lambda o: o["high"], "state/retnorm/hi/value", DEEP),
        c("outs/replay/dyn/deter", lambda o: o["replay"]["deter"], "outs/replay/dyn/deter", DEEP),
        c("outs/replay/dyn/stoch", lambda o: onehot(o["replay"]["stoch"]),
          "outs/replay/dyn/stoch", TIGHT),
        c("carry/dyn/deter", lambda o: o["carry"]["deter"], "carry/dyn/deter", DEEP),
        c("carry/dyn/stoch", lambda o: o["carry"]["stoch"], "carry/dyn/stoch", TIGHT),
        c("carry/prevact/action", lambda o: o["carry"]["action"], "carry/prevact/action", TIGHT),
    ]
    ref = {k[len(pre) + 4:]: flat[k] for k in flat if k.startswith(pre + "met/")}
    rows += _metric_rows(fx, pre + "met/", ours["metrics"], spread["metrics"], ref)
    return rows


# ----------------------------------------------------------------------------- registry


def _register() -> None:
    from dreamerjax.tools.parity.agent_checks import _rows
    from dreamerjax.tools.parity.fixtures import register, register_companion

    register("head_loss*.npz", _rows(check_head_loss))
    register("head_update*.npz", _rows(check_head_update))
    register_companion("head_params_*.npz")


_register()


__all__ = ["check_head_loss", "check_head_update", "config_from_head_yaml", "our_name"]
