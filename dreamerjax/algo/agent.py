"""The DreamerV3 agent as pure functions: init, policy step, loss and one update.

Follows agent.py @29eb964 (Agent.policy :129-164, Agent.train :166-223, Agent.loss :225-399).
Everything is jittable and vmappable over a leading seed axis; no globals, no host callbacks.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dreamerjax.algo import fsdp as fsdp_lib
from dreamerjax.algo import nets
from dreamerjax.algo import numerics as nm
from dreamerjax.algo.metrics_e3f0224 import (
    E3F0224_LOSS_NAMES,
    batch_stats,
    e3f0224_loss_order,
    loss_metrics_e3f0224,
)
from dreamerjax.algo.normalize import (
    RetNormState,
    norm_init,
    norm_stats,
    norm_update,
    retnorm_init,
    retnorm_stats,
    retnorm_update,
)
from dreamerjax.algo.optim import (
    OPT_METRICS,
    OPT_RMS_METRICS,
    make_optimizer,
    optimizer_metrics,
    slow_update,
)
from dreamerjax.algo.returns import imagined_returns, imagined_returns_e3f0224, replay_return
from dreamerjax.algo.spaces import Spaces, preprocess
from dreamerjax.config.defaults import AgentConfig, Reference

sg = jax.lax.stop_gradient
f32 = jnp.float32

MODULES = ("enc", "dyn", "dec", "rew", "con", "actor", "critic")


def compute_dtype(cfg: AgentConfig):
    """The activations' JAX dtype (jax.compute_dtype)."""
    return nm.compute_dtype(cfg.compute_dtype)


@flax.struct.dataclass
class AgentState:
    """All learner state of one seed."""

    params: dict  # {enc, dyn, dec, rew, con, actor, critic}
    slow: dict  # slow critic, same layout as params['critic']
    opt_state: optax.OptState
    retnorm: RetNormState
    step: jnp.ndarray  # optimiser steps taken (reference opt/step)
    updates: jnp.ndarray  # slow-updater counter (reference updater/updates)
    # valnorm / advnorm states (normalize.norm_init); {} for a normaliser that is off, so
    # a default run carries none.
    norms: dict = flax.struct.field(default_factory=dict)


# ----------------------------------------------------------------------------- init


def _feat_dim(cfg: AgentConfig) -> int:
    return cfg.rssm.deter + cfg.rssm.stoch * cfg.rssm.classes


def init_params(key, cfg: AgentConfig, spaces: Spaces) -> dict:
    ks = jax.random.split(key, 7)
    fdim = _feat_dim(cfg)
    width = lambda bins: nets.twohot_width(bins, cfg.version)  # noqa: E731
    enc, edim = nets.init_encoder(ks[0], cfg, spaces)
    actor = nets.init_mlp(ks[5], fdim, cfg.actor.units, cfg.actor.layers, "h")
    ka, kb = jax.random.split(ks[6])
    actor["action"] = {"out": nets.init_linear(ka, cfg.actor.units, spaces.act_dim,
                                               cfg.actor.outscale)}
    if not spaces.act_discrete:
        actor["action"]["std"] = nets.init_linear(kb, cfg.actor.units, spaces.act_dim,
                                                  cfg.actor.outscale)
    kc = jax.random.fold_in(ks[6], 1)
    return {
        "enc": enc,
        "dyn": nets.init_rssm(ks[1], cfg.rssm, edim, spaces.act_dim),
        "dec": nets.init_decoder(ks[2], cfg, spaces),
        "rew": nets.init_head(ks[3], fdim, cfg.rewhead.units, cfg.rewhead.layers,
                              width(cfg.rewhead.bins), cfg.rewhead.outscale),
        "con": nets.init_head(ks[4], fdim, cfg.conhead.units, cfg.conhead.layers, 1,
                              cfg.conhead.outscale),
        "actor": actor,
        "critic": nets.init_head(kc, fdim, cfg.critic.units, cfg.critic.layers,
                                 width(cfg.critic.bins), cfg.critic.outscale),
    }


def optimizer(cfg: AgentConfig, slices: fsdp_lib.Slices | None = None
              ) -> optax.GradientTransformation:
    return make_optimizer(cfg.opt, cfg.version, slices=slices,
                          lrs=cfg.lrs if cfg.separate_lrs else None)


def norms_init(cfg: AgentConfig) -> dict:
    """{'valnorm': state, 'advnorm': state} of the normalisers that are on (else {})."""
    states = {k: norm_init(getattr(cfg, k), cfg.version) for k in ("valnorm", "advnorm")}
    return {k: v for k, v in states.items() if v}


def param_slices(cfg: AgentConfig, spaces: Spaces, fsdp: fsdp_lib.Fsdp) -> fsdp_lib.Slices:
    """How the parameters lie over an FSDP axis: each leaf's split axis from its global
    shape (algo/fsdp.py's rule), found by tracing init_params (no compute)."""
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    shapes = jax.eval_shape(lambda k: init_params(k, cfg, spaces), key)
    return fsdp_lib.Slices(fsdp_lib.dims_of(shapes, fsdp.size), fsdp)


def init(key, cfg: AgentConfig, spaces: Spaces) -> AgentState:
    """Fresh learner state. The slow critic starts as its own draw and is overwritten by a
    copy of the critic at the first update (jaxutils.py:749-751 @29eb964); at HEAD it
    starts as a copy of the critic (SlowModel._initonce, utils.py:121-127 @e3f0224)."""
    k1, k2 = jax.random.split(key)
    params = init_params(k1, cfg, spaces)
    slow = (params["critic"] if cfg.version == Reference.E3F0224
            else init_params(k2, cfg, spaces)["critic"])
    return AgentState(
        params=params,
        slow=slow,
        opt_state=optimizer(cfg).init(params),
        retnorm=retnorm_init(),
        step=jnp.zeros((), jnp.int32),
        updates=jnp.zeros((), jnp.int32),
        norms=norms_init(cfg),
    )


def state_shapes(cfg: AgentConfig, spaces: Spaces) -> AgentState:
    """One seed's AgentState as shapes and dtypes (jax.ShapeDtypeStruct leaves): what init
    allocates, traced and nothing allocated."""
    return jax.eval_shape(lambda k: init(k, cfg, spaces), jax.random.PRNGKey(0))


# ----------------------------------------------------------------------------- actor


def actor_out(p: dict, cfg: AgentConfig, spaces: Spaces, x):
    """Actor distribution parameters on features x [..., F]: discrete -> unimix logits
    [..., A]; continuous -> (mean, std) [..., A] (nets.py:490-535). The layers compute in
    the compute dtype, the distribution in float32 (nets.py:442,448). HEAD's discrete
    policy is `categorical` without unimix (heads.py:101-110 @e3f0224)."""
    e3f0224 = cfg.version == Reference.E3F0224
    h = nets.mlp(p, nm.cast(x, compute_dtype(cfg)), cfg.actor.layers, "h", e3f0224)
    out = nm.cast(nets.linear(p["action"]["out"], h), f32)
    if spaces.act_discrete:
        return out if e3f0224 else nm.unimix_logits(out, cfg.actor_unimix)
    std = nm.cast(nets.linear(p["action"]["std"], h), f32)
    return nm.normal_params(out, std, cfg.actor_minstd, cfg.actor_maxstd)


def actor_sample(dist, spaces: Spaces, key, mode: bool):
    """One-hot [.., A] (straight-through) for discrete, a float vector for continuous;
    `mode` takes the argmax / the mean."""
    if spaces.act_discrete:
        return nm.onehot_mode(dist) if mode else nm.onehot_sample(key, dist)
    mean, std = dist
    return mean if mode else nm.normal_sample(key, mean, std)


def actor_log_prob(dist, spaces: Spaces, act, version: Reference = Reference.V29EB964):
    """log pi(act): tfp's formulas at 29eb964, outs.py's at e3f0224 (numerics)."""
    e3f0224 = version == Reference.E3F0224
    if spaces.act_discrete:
        return (nm.categorical_log_prob if e3f0224 else nm.onehot_log_prob)(dist, act)
    if e3f0224:
        return nm.normal_log_prob_scipy(dist[0], dist[1], act)
    return nm.normal_log_prob(dist[0], dist[1], act)


def actor_entropy(dist, spaces: Spaces, version: Reference = Reference.V29EB964):
    e3f0224 = version == Reference.E3F0224
    if spaces.act_discrete:
        return (nm.categorical_entropy if e3f0224 else nm.onehot_entropy)(dist)
    return (nm.normal_entropy_e3f0224 if e3f0224 else nm.normal_entropy)(dist[1])


def actor_entropy_range(cfg: AgentConfig, spaces: Spaces) -> tuple[float, float]:
    """(minent, maxent) used to normalise the entropy into rand/action (nets.py:495-533)."""
    if spaces.act_discrete:
        return 0.0, float(np.log(spaces.act_dim))
    return nm.normal_minmax_entropy(spaces.act_dim, cfg.actor_minstd, cfg.actor_maxstd)


def embed_action(action, spaces: Spaces):
    """Stored action (int32 index or float vector) -> RSSM input [..., A]."""
    if spaces.act_discrete:
        return jax.nn.one_hot(action, spaces.act_dim, dtype=f32)
    return action.astype(f32)


# ----------------------------------------------------------------------------- policy


def policy_initial(cfg: AgentConfig, spaces: Spaces, batch: int) -> dict:
    """Zero latent and zero previous action (agent.py:114-118)."""
    carry = nets.rssm_initial(cfg.rssm, batch)
    if spaces.act_discrete:
        carry["action"] = jnp.zeros((batch,), jnp.int32)
    else:
        carry["action"] = jnp.zeros((batch, spaces.act_dim), f32)
    return carry


def policy_params(cfg: AgentConfig, params: dict) -> dict:
    """What `policy` reads of the parameters: the encoder, the RSSM's posterior step
    (nets.posterior_params: not the prior's layers) and the actor; not the decoder, the
    reward and continue heads or the critic. params may be any tree shaped as the
    parameters (their slices' split axes, say). The reference's acting copy holds the
    groups matching ^(enc|dyn|dec|pol)/ (dreamerv3/agent.py:86-87 @e3f0224), the decoder
    and the prior included, which its policy does not compute with either."""
    return {"enc": params["enc"], "dyn": nets.posterior_params(params["dyn"], cfg.rssm),
            "actor": params["actor"]}


def policy(params, cfg: AgentConfig, spaces: Spaces, carry: dict, obs: dict, is_first, key,
           mode: bool = False):
    """One acting step on a batch of envs (agent.py:129-164). params: the whole
    parameters or policy_params of them.

    obs {name: [B, *shape]} in the stored dtype, is_first [B] -> (action [B] int32 |
    [B, A], new carry, latent {deter [B, D], stoch [B, S] int32} to store with the row for
    replay context). The carry keeps its own dtype (float32 holds every bfloat16 value) and
    the stored deter is float32 (agent.py:108-109).
    """
    k1, k2 = jax.random.split(key)
    embed = nets.encode(params["enc"], cfg, spaces, preprocess(spaces, obs, compute_dtype(cfg)))
    prevact = embed_action(carry["action"], spaces)
    lat = {"deter": carry["deter"], "stoch": carry["stoch"]}
    lat, out = nets.obs_step(params["dyn"], cfg.rssm, lat, prevact, embed, is_first, k1, mode,
                             cfg.version)
    dist = actor_out(params["actor"], cfg, spaces, nets.feat(out))
    act = actor_sample(dist, spaces, k2, mode)
    if spaces.act_discrete:
        act = jnp.argmax(act, -1).astype(jnp.int32)
    new_carry = {"deter": nm.cast(lat["deter"], carry["deter"].dtype),
                 "stoch": nm.cast(lat["stoch"], carry["stoch"].dtype), "action": act}
    latent = {"deter": nm.cast(out["deter"], f32),
              "stoch": jnp.argmax(out["stoch"], -1).astype(jnp.int32)}
    return act, new_carry, latent


# ----------------------------------------------------------------------------- heads


def reward_bins(cfg: AgentConfig):
    """The reward head's two-hot bins (its own HeadConfig.bins)."""
    return nm.twohot_bins(cfg.rewhead.bins)


def critic_bins(cfg: AgentConfig):
    """The critic's and the slow critic's two-hot bins."""
    return nm.twohot_bins(cfg.critic.bins)


def twohot_expectation(cfg: AgentConfig, logits, bins):
    """Expectation of a two-hot head in the configured summation (numerics.TWOHOT_MEANS)."""
    return nm.TWOHOT_MEANS[cfg.twohot_mean](logits, bins)


def reward_logits(p, cfg: AgentConfig, x):
    return nets.twohot_logits(p, x, cfg.rewhead.layers, cfg.rewhead.bins, compute_dtype(cfg),
                              cfg.version == Reference.E3F0224)


def critic_logits(p, cfg: AgentConfig, x):
    """Critic or slow critic (same layout) logits on features x [..., F] -> [..., K]."""
    return nets.twohot_logits(p, x, cfg.critic.layers, cfg.critic.bins, compute_dtype(cfg),
                              cfg.version == Reference.E3F0224)


def cont_logit(p, cfg: AgentConfig, x):
    return nets.head(p, x, cfg.conhead.layers, compute_dtype(cfg),
                     norm32=cfg.version == Reference.E3F0224)[..., 0]


def cont_log_prob(cfg: AgentConfig, logit, label):
    """log p(label) of the continue head: tfp's Bernoulli at 29eb964, e3f0224's Binary
    (outs.py:197-201 @e3f0224)."""
    if cfg.version == Reference.E3F0224:
        return nm.binary_log_prob(logit, label)
    return nm.bernoulli_log_prob(logit, label)


# The statistics _balance_stats reports (rewstats/..., constats/...), in its order.
BALANCE_STATS = ("pos_loss", "neg_loss", "pos_acc", "neg_acc", "rate", "avg", "pred")


def _balance_stats(pred_mean, loss, target, thres):
    """Reference jaxutils.balance_stats (:282-298); NaN where a class is absent."""
    pos = (target > thres).astype(f32)
    neg = (target <= thres).astype(f32)
    pred = (pred_mean > thres).astype(f32)
    return dict(zip(BALANCE_STATS, (
        (loss * pos).sum() / pos.sum(), (loss * neg).sum() / neg.sum(),
        (pred * pos).sum() / pos.sum(), ((1 - pred) * neg).sum() / neg.sum(),
        pos.mean(), target.mean(), pred_mean.mean()), strict=True))


# ----------------------------------------------------------------------------- world model


def decoder_losses(spaces: Spaces, dec: dict, obs: dict, raw: dict | None = None) -> dict:
    """-log p of each decoded key, [B, T] each, named by the key: vectors symlog-MSE with
    the 1e-8 tolerance (TransformedMseDist, jaxutils.py:179-207), images MSE against the
    preprocessed image (MSEDist, jaxutils.py:124-148), both summed over the key's dims, in
    float32 (agent.py:241 casts the targets, nets.py:367,442 the predictions).

    raw: the stored observations, given for e3f0224's losses (agent.py:178-182, outs.py:
    129-141 @e3f0224): symlog-MSE without the 1e-8 term, the image target float32 / 255
    whatever the compute dtype."""
    losses = {}
    for name in spaces.dec_vector_keys:
        dist = (dec[name] - nm.symlog(obs[name])) ** 2
        losses[name] = (dist if raw is not None else jnp.where(dist < 1e-8, 0.0, dist)).sum(-1)
    for name in spaces.dec_image_keys:
        target = nm.cast(obs[name], f32)
        if raw is not None:
            x = raw[name]
            target = x.astype(f32) / 255 if x.dtype == jnp.uint8 else x.astype(f32)
        losses[name] = ((dec[name] - target) ** 2).sum((-3, -2, -1))
    return losses


def world_model(params, cfg: AgentConfig, spaces: Spaces, data: dict, carry: dict, key):
    """World-model half of Agent.loss (agent.py:229-249): observe the rows, decode, predict
    reward and continuation, KL terms. Needs only params enc, dyn, dec, rew, con.

    Returns dict(losses {<decoder keys>, reward, cont, dyn, rep} each [B, T] unscaled, post
    {deter, stoch, logit} [B, T, ...], newlat, embed [B, T, E], feat, prevacts [B, T, A],
    dec {key: prediction in symlog / pixel space}, rew_logits [B, T, K], con_logit [B, T],
    metrics).
    """
    version = cfg.version
    obs = preprocess(spaces, data["obs"], compute_dtype(cfg))
    prevacts = jnp.concatenate([carry["action"][:, None], data["action"][:, :-1]], 1)
    prevacts = embed_action(prevacts, spaces)
    embed = nets.encode(params["enc"], cfg, spaces, obs)
    lat0 = {"deter": carry["deter"], "stoch": carry["stoch"]}
    newlat, post = nets.observe(params["dyn"], cfg.rssm, lat0, prevacts, embed,
                                data["is_first"], key, cfg.sample_mode, version)
    x = nets.feat(post)
    dec = nets.decode(params["dec"], cfg, spaces, post)
    losses = decoder_losses(spaces, dec, obs,
                            data["obs"] if version == Reference.E3F0224 else None)
    rew_logits = reward_logits(params["rew"], cfg, x)
    losses["reward"] = -nm.twohot_log_prob(rew_logits, data["reward"].astype(f32),
                                           reward_bins(cfg))
    con_logit = cont_logit(params["con"], cfg, x)
    cont_data = 1.0 - data["is_terminal"].astype(f32)
    label = cont_data * (1 - 1 / cfg.horizon) if cfg.contdisc else cont_data
    losses["cont"] = -cont_log_prob(cfg, con_logit, label)
    dyn, rep, metrics = nets.rssm_kl_losses(params["dyn"], cfg.rssm, post, cfg.free_nats,
                                            version)
    losses["dyn"], losses["rep"] = dyn, rep
    return dict(losses=losses, post=post, newlat=newlat, embed=embed, feat=x,
                prevacts=prevacts, dec=dec, rew_logits=rew_logits, con_logit=con_logit,
                metrics=metrics)


# ----------------------------------------------------------------------------- imagination


def imagine(params, cfg: AgentConfig, spaces: Spaces, start: dict, key, mode: bool):
    """Roll the prior forward imag_length steps from every start state (agent.py:252-282).

    start {deter [N, D], stoch [N, S, C], logit [N, S, C]} -> (traj with [N, H+1, ...],
    acts [N, H+1, A]); index 0 is the start state and the action taken there. No gradient
    flows through the rollout (its outputs are only used under stop_gradient), so the
    params are stop-gradiented here to spare the backward pass. Latents and actions are in
    the compute dtype (the sampled actions are cast to it, agent.py:256,275).
    """
    params = sg(params)
    H = cfg.imag_length
    dt = compute_dtype(cfg)
    version = cfg.version
    k0, kscan = jax.random.split(key)
    dist0 = actor_out(params["actor"], cfg, spaces, nets.feat(start))
    act0 = nm.cast(actor_sample(dist0, spaces, k0, mode), dt)

    def step(carry, k):
        lat, act = carry
        ka, kb = jax.random.split(k)
        lat, out = nets.img_step(params["dyn"], cfg.rssm, lat, act, ka, mode, version)
        dist = actor_out(params["actor"], cfg, spaces, nets.feat(out))
        act = nm.cast(actor_sample(dist, spaces, kb, mode), dt)
        return (lat, act), (out, act)

    init = sg(({"deter": start["deter"], "stoch": start["stoch"]}, act0))
    _, (outs, acts) = jax.lax.scan(step, init, jax.random.split(kscan, H))
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    traj = jax.tree.map(
        lambda first, seq: jnp.concatenate([first[:, None], swap(seq)], 1),
        {k: start[k] for k in ("deter", "stoch", "logit")}, outs)
    acts = jnp.concatenate([act0[:, None], swap(acts)], 1)
    return sg(traj), sg(acts)


def slow_target(cfg: AgentConfig, slow_logits):
    """The critic's regulariser target (agent.py:339-340): the slow critic's expectation."""
    return sg(twohot_expectation(cfg, slow_logits, critic_bins(cfg)))


def imagined_targets(params, slow, cfg: AgentConfig, spaces: Spaces, data: dict,
                     post: dict, key, norms: dict | None = None) -> dict:
    """Imagination from every posterior state, annotated with rewards, continuation,
    values and lambda returns (agent.py:251-320).

    Returns dict of [N = B*T, H+1, ...]: traj, acts, rew, con, weight, critic_logits,
    slow_logits, val, slowval, tarval, adist (actor outputs on the trajectory), and
    ret [N, H]. norms: the valnorm state before this update (AgentState.norms); with
    valnorm on the critics' outputs are normalised values, val = out * scale + offset
    (agent.py:294-296 @29eb964, agent.py:395-397 @e3f0224).
    """
    B, T = data["is_first"].shape
    flat = lambda v: v.reshape((B * T, *v.shape[2:]))  # noqa: E731
    traj, acts = imagine(params, cfg, spaces, jax.tree.map(flat, post), key, cfg.sample_mode)
    tfeat = nets.feat(traj)
    rew, con = sg(imagined_rew_con(params, cfg, data, tfeat, flat))
    inp = sg(tfeat)  # ac_grads none
    c_logits = critic_logits(params["critic"], cfg, inp)
    s_logits = critic_logits(slow, cfg, inp)
    val = twohot_expectation(cfg, c_logits, critic_bins(cfg))
    slowval = slow_target(cfg, s_logits)
    vstats = {}
    vstate = (norms or {}).get("valnorm")
    if vstate:
        voffset, vscale = norm_stats(vstate, cfg.valnorm, cfg.version)
        val = val * vscale + voffset
        vstats = {"vstats": (voffset, vscale)}
    tarval = sg(val)  # slowtar False
    if cfg.version == Reference.E3F0224:
        ret, weight = imagined_returns_e3f0224(rew, con, tarval, cfg.return_lambda,
                                               cfg.contdisc, cfg.horizon)
    else:
        ret, weight = imagined_returns(rew, con, tarval, cfg.return_lambda, cfg.contdisc,
                                       cfg.horizon)
    return dict(traj=traj, acts=acts, rew=rew, con=con, weight=sg(weight),
                critic_logits=c_logits, slow_logits=s_logits, val=val, slowval=slowval,
                tarval=tarval, ret=sg(ret),
                adist=actor_out(params["actor"], cfg, spaces, inp), **vstats)


def imagined_rew_con(params, cfg: AgentConfig, data: dict, tfeat, flat):
    """Reward and continuation [N, H+1] along the imagined trajectories tfeat [N, H+1, F].
    29eb964 takes the start state's from the data (agent.py:283-290 @29eb964); e3f0224
    predicts them there too (agent.py:203-206 @e3f0224), its continuation as the Binary's
    prob(1), so the loss weight starts with the predicted continue at t = 0."""
    if cfg.version == Reference.E3F0224:
        rew = twohot_expectation(cfg, reward_logits(params["rew"], cfg, tfeat),
                                 reward_bins(cfg))
        return rew, nm.binary_prob1(cont_logit(params["con"], cfg, tfeat))
    rew = jnp.concatenate([
        flat(data["reward"].astype(f32))[:, None],
        twohot_expectation(cfg, reward_logits(params["rew"], cfg, tfeat[:, 1:]),
                           reward_bins(cfg))], 1)
    con = jnp.concatenate([
        flat(1.0 - data["is_terminal"].astype(f32))[:, None],
        nm.bernoulli_mean(cont_logit(params["con"], cfg, tfeat[:, 1:]))], 1)
    return rew, con


# ----------------------------------------------------------------------------- actor-critic


def actor_loss(cfg: AgentConfig, spaces: Spaces, img: dict, retnorm: RetNormState,
               data_axis: str | None = None, norms: dict | None = None):
    """REINFORCE with percentile-normalised advantages and an entropy bonus
    (agent.py:322-333). Returns (loss [N, H], updated retnorm, parts {adv, logpi, ent,
    offset, scale}). data_axis: see `update`. norms: with advnorm on, its state, moved by
    this batch's advantages, which it then normalises (agent.py:325-327 @29eb964); parts
    then holds the new state as `advnorm`."""
    ret, tarval, weight = img["ret"], img["tarval"], img["weight"]
    retnorm = retnorm_update(retnorm, ret, cfg.retnorm, data_axis)
    offset, scale = retnorm_stats(retnorm, cfg.retnorm)
    adv = (ret - tarval[:, :-1]) / scale
    adv_normed, extra = adv, {}
    astate = (norms or {}).get("advnorm")
    if astate:
        astate = norm_update(astate, adv, cfg.advnorm, cfg.version, data_axis)
        aoffset, ascale = norm_stats(astate, cfg.advnorm, cfg.version)
        adv_normed, extra = (adv - aoffset) / ascale, {"advnorm": astate}
    logpi = actor_log_prob(img["adist"], spaces, sg(img["acts"]), cfg.version)[:, :-1]
    ent = actor_entropy(img["adist"], spaces, cfg.version)[:, :-1]
    loss = weight[:, :-1] * -(logpi * sg(adv_normed) + cfg.actent * ent)
    return loss, retnorm, dict(adv=adv, logpi=logpi, ent=ent, offset=offset, scale=scale,
                               **extra)


def valnorm_target(cfg: AgentConfig, ret, norms: dict, data_axis: str | None = None):
    """(ret normalised, norms) after moving valnorm by ret (agent.py:335-337, 360-361
    @29eb964; agent.py:417-418, 467-468 @e3f0224); ret as it is when valnorm is off."""
    vstate = norms.get("valnorm")
    if not vstate:
        return ret, norms
    vstate = norm_update(vstate, ret, cfg.valnorm, cfg.version, data_axis)
    voffset, vscale = norm_stats(vstate, cfg.valnorm, cfg.version)
    return (ret - voffset) / vscale, {**norms, "valnorm": vstate}


def critic_loss(cfg: AgentConfig, img: dict, ret=None):
    """Two-hot critic on the imagined returns plus slowreg towards the slow critic
    (agent.py:335-341): [N, H]. ret: the returns normalised by valnorm (valnorm_target),
    when it is on."""
    bins = critic_bins(cfg)
    ret = img["ret"] if ret is None else ret
    ret_padded = jnp.concatenate([ret, jnp.zeros_like(ret[:, -1:])], 1)
    logits = img["critic_logits"]
    lp = (nm.twohot_log_prob(logits, ret_padded, bins)
          + cfg.slowreg * nm.twohot_log_prob(logits, img["slowval"], bins))
    return img["weight"][:, :-1] * -lp[:, :-1]


def replay_critic_loss(params, slow, cfg: AgentConfig, data: dict, x, ret,
                       norms: dict | None = None, data_axis: str | None = None):
    """The critic on the replayed rows' lambda returns, bootstrapped from the imagined
    return of each row (agent.py:343-366, replay_critic_bootstrap imag).

    x [B, T, F] posterior features, ret [B*T, H] -> (loss [B, T-1], replay_ret [B, T-1],
    boot [B, T]), and with norms given (valnorm on) the norms after valnorm moved by the
    replay returns, which it normalises for the loss."""
    bins = critic_bins(cfg)
    B, T = data["is_first"].shape
    logits = critic_logits(params["critic"], cfg, x)
    slowval = slow_target(cfg, critic_logits(slow, cfg, x))
    boot = ret[:, 0].reshape((B, T))
    replay_ret = sg(replay_return(
        data["reward"].astype(f32), boot, data["is_terminal"], data["is_last"],
        cfg.return_lambda_replay, cfg.horizon))
    target = replay_ret
    if norms is not None:
        target, norms = valnorm_target(cfg, replay_ret, norms, data_axis)
    rpad = jnp.concatenate([target, jnp.zeros_like(target[:, -1:])], 1)
    lp = (nm.twohot_log_prob(logits, rpad, bins)
          + cfg.slowreg * nm.twohot_log_prob(logits, slowval, bins))
    live = 1.0 - data["is_last"].astype(f32)
    if norms is not None:
        return live[:, :-1] * -lp[:, :-1], replay_ret, boot, norms
    return live[:, :-1] * -lp[:, :-1], replay_ret, boot


def loss_metrics(cfg: AgentConfig, spaces: Spaces, data: dict, wm: dict, img: dict,
                 parts: dict, losses: dict, replay_ret) -> dict:
    """The scalar metrics of Agent.loss (agent.py:368-405), losses unscaled."""
    metrics = dict(wm["metrics"])
    metrics.update({f"{k}_loss": v.mean() for k, v in losses.items()})
    metrics.update({f"{k}_loss_std": v.std() for k, v in losses.items()})
    ret, val, rew = img["ret"], img["val"], img["rew"]
    metrics.update(nm.tensorstats(parts["adv"], "adv"))
    metrics.update(nm.tensorstats(rew, "rew"))
    metrics.update(nm.tensorstats(img["weight"], "weight"))
    metrics.update(nm.tensorstats(val, "val"))
    metrics.update(nm.tensorstats(ret, "ret"))
    metrics.update(nm.tensorstats((ret - parts["offset"]) / parts["scale"], "ret_normed"))
    if replay_ret is not None:
        metrics.update(nm.tensorstats(replay_ret, "replay_ret"))
    metrics["td_error"] = jnp.abs(ret - val[:, :-1]).mean()
    metrics["ret_rate"] = (jnp.abs(ret) > 1.0).astype(f32).mean()
    acts = img["acts"]
    act_stat = jnp.argmax(acts, -1).astype(f32) if spaces.act_discrete else acts
    metrics.update(nm.tensorstats(act_stat, "act/action"))
    ent = parts["ent"]
    lo, hi = actor_entropy_range(cfg, spaces)
    metrics.update(nm.tensorstats((ent - lo) / (hi - lo), "rand/action"))
    metrics.update(nm.tensorstats(ent, "ent/action"))
    data_rew = data["reward"].astype(f32)
    metrics["data_rew/max"] = jnp.abs(data_rew).max()
    metrics["pred_rew/max"] = jnp.abs(rew).max()
    metrics["data_rew/mean"] = data_rew.mean()
    metrics["pred_rew/mean"] = rew.mean()
    metrics["data_rew/std"] = data_rew.std()
    metrics["pred_rew/std"] = rew.std()
    rew_mean = twohot_expectation(cfg, wm["rew_logits"], reward_bins(cfg))
    rstats = _balance_stats(rew_mean, losses["reward"], data_rew, 0.1)
    metrics.update({f"rewstats/{k}": v for k, v in rstats.items()})
    cont_data = 1.0 - data["is_terminal"].astype(f32)
    con_logit = wm["con_logit"]
    cstats = _balance_stats(nm.bernoulli_mean(con_logit),
                            -nm.bernoulli_log_prob(con_logit, cont_data), cont_data, 0.5)
    metrics.update({f"constats/{k}": v for k, v in cstats.items()})
    # The mean in the embedding's dtype, cast back as the reference's metrics (jaxagent.py:371).
    metrics["activation/embed"] = nm.cast(jnp.abs(wm["embed"]).mean(), f32)
    return metrics


def metric_names(cfg: AgentConfig, spaces: Spaces) -> tuple[str, ...]:
    """The names of `update`'s metrics, sorted, from the config and the spaces alone: the
    run's metric window is made from them before anything is traced (tests/
    test_metric_names.py checks them against the update's own for each version and kind
    of space). The loss terms: loss_scales' less the replay critic's when it is off."""
    losses = [k for k in loss_scales(cfg, spaces)
              if k != "replay_critic" or cfg.replay_critic_loss]
    names = ["opt_loss", *OPT_METRICS]
    if cfg.version == Reference.E3F0224:  # loss_metrics_e3f0224, rssm_kl_losses'
        names += ["dyn_ent", "rep_ent", "adv", "adv_std", "adv_mag", "rew", "con", "ret",
                  "val", "tar", "weight", "slowval", "ret_min", "ret_max", "ret_rate",
                  "ent/action", *OPT_RMS_METRICS]
        names += ["rand/action"] if spaces.act_discrete else []
        names += [f"loss/{E3F0224_LOSS_NAMES.get(k, k)}" for k in losses]
        names += [f"{k}_loss" for k in losses]
        return tuple(sorted(names))
    stats = ["prior_ent", "post_ent", "adv", "rew", "weight", "val", "ret", "ret_normed",
             "act/action", "rand/action", "ent/action"]
    stats += ["replay_ret"] if cfg.replay_critic_loss else []
    names += [n for prefix in stats for n in nm.tensorstats_names(prefix)]  # loss_metrics'
    names += [f"{k}_loss{s}" for k in losses for s in ("", "_std")]
    names += ["td_error", "ret_rate", "activation/embed"]
    names += [f"{k}_rew/{s}" for k in ("data", "pred") for s in ("max", "mean", "std")]
    names += [f"{k}/{s}" for k in ("rewstats", "constats") for s in BALANCE_STATS]
    return tuple(sorted(names))


def loss_fn(params, slow, retnorm: RetNormState, cfg: AgentConfig, spaces: Spaces,
            data: dict, carry: dict, key, data_axis: str | None = None,
            norms: dict | None = None):
    """Agent.loss (agent.py:225-399) on trained rows.

    data: obs {name: [B, T, *shape]} (stored dtype), action [B, T] | [B, T, A],
    reward / is_first / is_last / is_terminal [B, T]; carry: {deter [B, D], stoch
    [B, S, C], action [B] | [B, A]} from the context row.
    Returns (total, aux) with aux = dict(losses (scaled, per element), post, embed,
    prevacts, carry, metrics, retnorm (updated state), norms (valnorm / advnorm states
    after the update, AgentState.norms), diag (intermediates)).
    data_axis: see `update`. norms: AgentState.norms ({} or None: both off).
    """
    e3f0224 = cfg.version == Reference.E3F0224
    norms = dict(norms or {})
    k_obs, k_img = jax.random.split(key)
    wm = world_model(params, cfg, spaces, data, carry, k_obs)
    losses = dict(wm["losses"])
    img = imagined_targets(params, slow, cfg, spaces, data, wm["post"], k_img, norms)
    losses["actor"], retnorm, parts = actor_loss(cfg, spaces, img, retnorm, data_axis, norms)
    if "advnorm" in parts:
        norms["advnorm"] = parts.pop("advnorm")
    if norms.get("valnorm"):
        parts["tar"], norms = valnorm_target(cfg, img["ret"], norms, data_axis)
        losses["critic"] = critic_loss(cfg, img, parts["tar"])
    else:
        losses["critic"] = critic_loss(cfg, img)
    replay_ret = boot = None
    if cfg.replay_critic_loss and norms.get("valnorm"):
        losses["replay_critic"], replay_ret, boot, norms = replay_critic_loss(
            params, slow, cfg, data, wm["feat"], img["ret"], norms, data_axis)
    elif cfg.replay_critic_loss:
        losses["replay_critic"], replay_ret, boot = replay_critic_loss(
            params, slow, cfg, data, wm["feat"], img["ret"])
    if e3f0224:
        B, T = data["is_first"].shape
        for k in ("actor", "critic"):  # e3f0224 returns them averaged over the horizon
            losses[k] = losses[k].mean(1).reshape((B, T))
        metrics = loss_metrics_e3f0224(cfg, spaces, wm, img, parts, losses, data_axis)
    else:
        metrics = loss_metrics(cfg, spaces, data, wm, img, parts, losses, replay_ret)
    scales = loss_scales(cfg, spaces)
    total = total_loss(cfg.version, spaces, losses, scales)
    scaled = {k: v * scales[k] for k, v in losses.items()}
    new_carry = {"deter": wm["newlat"]["deter"], "stoch": wm["newlat"]["stoch"],
                 "action": data["action"][:, -1]}
    diag = {k: img[k] for k in ("traj", "acts", "rew", "con", "val", "slowval", "weight",
                                "critic_logits", "slow_logits", "ret", "adist")}
    diag.update(parts, replay_ret=replay_ret, boot=boot)
    aux = {"losses": scaled, "unscaled": losses, "post": wm["post"], "embed": wm["embed"],
           "prevacts": wm["prevacts"], "carry": new_carry, "metrics": metrics,
           "retnorm": retnorm, "norms": norms, "diag": diag, "dec": wm["dec"]}
    return total, aux


def total_loss(version: Reference, spaces: Spaces, losses: dict, scales: dict):
    """The scalar the gradients are of, from the unscaled loss terms {name: [B, T]}:
    29eb964 sums the means of the scaled terms in the terms' order (agent.py:393-394
    @29eb964); e3f0224 sums each term's mean times its scale in its own order
    (agent.py:215, 240 @e3f0224; e3f0224_loss_order)."""
    if version == Reference.E3F0224:
        return sum(losses[k].mean() * scales[k] for k in e3f0224_loss_order(spaces, losses))
    return jnp.stack([(v * scales[k]).mean() for k, v in losses.items()]).sum()


def loss_scales(cfg: AgentConfig, spaces: Spaces) -> dict:
    """Scale of every loss term (agent.py:88-93): image keys take loss_scales.dec_cnn,
    vector keys dec_mlp."""
    s = cfg.loss_scales
    scales = {k: s.dec_mlp for k in spaces.dec_vector_keys}
    scales.update({k: s.dec_cnn for k in spaces.dec_image_keys})
    scales.update(reward=s.reward, cont=s.cont, dyn=s.dyn, rep=s.rep, actor=s.actor,
                  critic=s.critic, replay_critic=s.replay_critic)
    return scales


# ----------------------------------------------------------------------------- update


def split_context(cfg: AgentConfig, spaces: Spaces, batch: dict):
    """A replay batch of L = 1 + T rows -> (carry from row 0, data of rows 1..T)
    (agent.py:172-183, replay_context = 1)."""
    carry = {
        "deter": batch["deter"][:, 0].astype(f32),
        "stoch": jax.nn.one_hot(batch["stoch"][:, 0], cfg.rssm.classes, dtype=f32),
        "action": batch["action"][:, 0],
    }
    keys = ("obs", "action", "reward", "is_first", "is_last", "is_terminal")
    data = {k: jax.tree.map(lambda x: x[:, 1:], batch[k]) for k in keys}
    return carry, data


def update(state: AgentState, cfg: AgentConfig, spaces: Spaces, batch: dict, key,
           data_axis: str | tuple[str, ...] | None = None,
           fsdp: fsdp_lib.Fsdp | None = None):
    """One train step (Agent.train): loss, gradients, optimiser, slow critic.

    batch (data/schema.batch_spec): obs {name: [B, 1+T, *shape]}, action, reward, is_first,
    is_last, is_terminal [B, 1+T], deter [B, 1+T, D] f32, stoch [B, 1+T, S] int32 (replay
    context latents).
    Returns (state, outs, metrics); outs['replay'] holds the posterior latents of rows 1..T
    for write-back ({deter [B, T, D], stoch [B, T, S] int32}) and outs['carry'] the final
    posterior carry.

    data_axis: None for an update on one device; else the name of the mapped axis
    (shard_map) that splits the global batch into equal shards, one per device, each
    calling `update` on its own shard with the same state and its own key: the
    gradients are averaged over the axis before the optimiser and the return
    normaliser sees every shard's returns, as the reference's data-parallel train step
    (jaxutils.py:338,499 @29eb964; embodied/jax/opt.py:52-54 @e3f0224). The state stays
    the same on every shard; the loss, metrics and outs are the shard's own.

    fsdp: the state's parameters, slow critic and optimiser moments are this device's
    slices over fsdp.axis (algo/fsdp.py; data_axis is then fsdp.batch_axes): the whole
    parameters are gathered for the loss, and the optimiser runs on this device's slice
    of the averaged gradients. The numbers are those of the replicated update up to the
    order of float32 sums.
    """
    if fsdp is None:
        return apply_gradients(state, cfg,
                               *gradients(state, cfg, spaces, batch, key, data_axis),
                               data_axis=data_axis)
    slices = param_slices(cfg, spaces, fsdp)
    whole = state.replace(params=fsdp_lib.gather(state.params, slices.dims, fsdp),
                          slow=fsdp_lib.gather(state.slow, slices.dims["critic"], fsdp))
    return apply_gradients(state, cfg, *gradients(whole, cfg, spaces, batch, key, data_axis),
                           data_axis=data_axis, slices=slices)


def reset_context(data: dict, chance: float, key) -> dict:
    """reset_context (agent.py:185-187 @29eb964): each sequence keeps its first row's
    is_first flag when a uniform draw exceeds `chance`, else the flag is cleared (the
    reference's `is_first[:, :1] & keep`: a flag the draw drops is never set). data:
    the trained rows, is_first [B, T]."""
    first = data["is_first"]
    keep = jax.random.uniform(key, first[:, :1].shape) > chance
    return {**data, "is_first": jnp.concatenate([first[:, :1] & keep, first[:, 1:]], 1)}


def gradients(state: AgentState, cfg: AgentConfig, spaces: Spaces, batch: dict, key,
              data_axis: str | None = None):
    """The loss of `update`'s batch and its gradients: (total, aux, grads), grads with the
    structure of state.params; aux as `loss_fn` returns it. The gradients are this
    shard's own (averaged in `apply_gradients`)."""
    carry, data = split_context(cfg, spaces, batch)
    if cfg.reset_context:
        key, k_reset = jax.random.split(key)
        data = reset_context(data, cfg.reset_context, k_reset)

    def lossf(params):
        return loss_fn(params, state.slow, state.retnorm, cfg, spaces, data, carry, key,
                       data_axis, state.norms)

    (total, aux), grads = jax.value_and_grad(lossf, has_aux=True)(state.params)
    return total, aux, grads


def apply_gradients(state: AgentState, cfg: AgentConfig, total, aux: dict, grads,
                    data_axis: str | tuple[str, ...] | None = None,
                    slices: fsdp_lib.Slices | None = None):
    """The rest of `update` from `gradients`' results: optimiser, slow critic, metrics and
    the posterior latents. Returns (state, outs, metrics) as `update`. slices: the state
    holds this device's slices (`update`'s fsdp); grads are whole, of this device's part
    of the batch."""
    if slices is not None:
        grads = fsdp_lib.mean_scatter(grads, slices.dims, slices.fsdp)
    elif data_axis is not None:
        grads = jax.tree.map(lambda g: jax.lax.pmean(g, data_axis), grads)
    opt = optimizer(cfg, slices)
    updates, opt_state = opt.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    step = state.step + 1
    e3f0224 = cfg.version == Reference.E3F0224
    slow, count = slow_update(state.slow, params["critic"], state.updates,
                              cfg.slow_critic_fraction, cfg.slow_critic_update,
                              copy_first=not e3f0224)
    metrics = dict(aux["metrics"])
    # e3f0224 reports the loss of the whole batch, 29eb964 each device's own (its metrics
    # leave the data-parallel step mirrored: device 0's, jaxagent.py:341-343 @29eb964).
    metrics["opt_loss"] = batch_stats(data_axis if e3f0224 else None)[0](total)
    metrics.update(optimizer_metrics(grads, updates, params, step, rms=e3f0224, slices=slices))
    new_state = AgentState(params=params, slow=slow, opt_state=opt_state,
                           retnorm=aux["retnorm"], step=step, updates=count,
                           norms=aux["norms"])
    post = aux["post"]
    # Latents leave the update in float32, as the replay stores them (agent.py:108-109).
    outs = {
        "replay": {"deter": nm.cast(post["deter"], f32),
                   "stoch": jnp.argmax(post["stoch"], -1).astype(jnp.int32)},
        "carry": nm.cast(aux["carry"], f32),
        "losses": aux["unscaled"],  # for the replay's priorities (priority_signal)
    }
    return new_state, outs, metrics


_NOT_DECODER = ("dyn", "rep", "reward", "cont", "actor", "critic", "replay_critic")


def priority_signal(losses: dict, signal: str, B: int, T: int) -> jax.Array:
    """29eb964's replay priority of each trained row [B, T] from the update's unscaled
    loss terms (agent.py:204-221 @29eb964, replay.priosignal): "model" the sum of the
    rep, dyn and decoder losses; "td" the critic loss of each row's first imagined step;
    "all" both and the actor's."""
    model = ["rep", "dyn", *(k for k in losses if k not in _NOT_DECODER)]
    terms = [losses[k] for k in model] if signal in ("model", "all") else []
    if signal == "all":
        terms.append(losses["actor"][:, 0].reshape((B, T)))
    if signal in ("td", "all"):
        terms.append(losses["critic"][:, 0].reshape((B, T)))
    if not terms:
        raise ValueError(f"replay.priosignal: {signal!r}; choose one of model, td, all")
    return jnp.stack([jnp.asarray(t, f32) for t in terms], 0).sum(0)


def param_counts(params: dict) -> dict:
    """Optimised variables per module, as the reference's optimizer prints them."""
    counts = {k: nets.param_count(params[k]) for k in MODULES}
    counts["total"] = sum(counts.values())
    return counts
