"""The DreamerV3 agent as pure functions: init, policy step, loss and one update.

Follows agent.py @29eb964 (Agent.policy :129-164, Agent.train :166-223, Agent.loss :225-399).
Everything is jittable and vmappable over a leading seed axis; no globals, no host callbacks.
"""

from __future__ import annotations

import dataclasses

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from dreamerjax import nets
from dreamerjax import numerics as nm
from dreamerjax.config import AgentConfig
from dreamerjax.normalize import RetNormState, retnorm_init, retnorm_stats, retnorm_update
from dreamerjax.optim import make_optimizer, optimizer_metrics, slow_update
from dreamerjax.returns import imagined_returns, replay_return

sg = jax.lax.stop_gradient
f32 = jnp.float32

MODULES = ("enc", "dyn", "dec", "rew", "con", "actor", "critic")


@dataclasses.dataclass(frozen=True)
class Spaces:
    """What the agent sees. obs_shape (D,) for vectors or (H, W, C) for images; actions are
    either `discrete` with `act_dim` classes (int32 index) or continuous in [-1, 1]^act_dim."""

    obs_shape: tuple[int, ...]
    act_discrete: bool
    act_dim: int

    def __post_init__(self):
        if len(self.obs_shape) not in (1, 3):
            raise ValueError(
                f"Unsupported observation shape {self.obs_shape}: dreamerjax handles flat "
                "vectors (D,) with the MLP encoder and images (H, W, C) with the CNN encoder.")
        if self.act_dim < 1 or (self.act_discrete and self.act_dim < 2):
            raise ValueError(
                f"Unsupported action space (discrete={self.act_discrete}, dim={self.act_dim}): "
                "need a discrete space with >= 2 actions or a continuous box with >= 1 dims.")

    @property
    def obs_key(self) -> str:
        """The reference's observation key, which names the decoder loss."""
        return "vector" if len(self.obs_shape) == 1 else "image"


@flax.struct.dataclass
class AgentState:
    """All learner state of one seed."""

    params: dict  # {enc, dyn, dec, rew, con, actor, critic}
    slow: dict  # slow critic, same layout as params['critic']
    opt_state: optax.OptState
    retnorm: RetNormState
    step: jnp.ndarray  # optimiser steps taken (reference opt/step)
    updates: jnp.ndarray  # slow-updater counter (reference updater/updates)


# ----------------------------------------------------------------------------- init


def _feat_dim(cfg: AgentConfig) -> int:
    return cfg.rssm.deter + cfg.rssm.stoch * cfg.rssm.classes


def init_params(key, cfg: AgentConfig, spaces: Spaces) -> dict:
    ks = jax.random.split(key, 7)
    fdim = _feat_dim(cfg)
    enc, edim = nets.init_encoder(ks[0], cfg, spaces.obs_shape)
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
        "dec": nets.init_decoder(ks[2], cfg, spaces.obs_shape),
        "rew": nets.init_head(ks[3], fdim, cfg.rewhead.units, cfg.rewhead.layers,
                              nets.twohot_width(cfg.rewhead.bins), cfg.rewhead.outscale),
        "con": nets.init_head(ks[4], fdim, cfg.conhead.units, cfg.conhead.layers, 1,
                              cfg.conhead.outscale),
        "actor": actor,
        "critic": nets.init_head(kc, fdim, cfg.critic.units, cfg.critic.layers,
                                 nets.twohot_width(cfg.critic.bins), cfg.critic.outscale),
    }


def optimizer(cfg: AgentConfig) -> optax.GradientTransformation:
    return make_optimizer(cfg.opt)


def init(key, cfg: AgentConfig, spaces: Spaces) -> AgentState:
    """Fresh learner state. The slow critic starts as its own draw and is overwritten by a
    copy of the critic at the first update (jaxutils.py:749-751)."""
    k1, k2 = jax.random.split(key)
    params = init_params(k1, cfg, spaces)
    slow = init_params(k2, cfg, spaces)["critic"]
    return AgentState(
        params=params,
        slow=slow,
        opt_state=optimizer(cfg).init(params),
        retnorm=retnorm_init(),
        step=jnp.zeros((), jnp.int32),
        updates=jnp.zeros((), jnp.int32),
    )


# ----------------------------------------------------------------------------- actor


def actor_out(p: dict, cfg: AgentConfig, spaces: Spaces, x):
    """Actor distribution parameters on features x [..., F]: discrete -> unimix logits
    [..., A]; continuous -> (mean, std) [..., A] (nets.py:490-535)."""
    h = nets.mlp(p, x, cfg.actor.layers, "h")
    out = nets.linear(p["action"]["out"], h)
    if spaces.act_discrete:
        return nm.unimix_logits(out, cfg.actor_unimix)
    std = nets.linear(p["action"]["std"], h)
    return nm.normal_params(out, std, cfg.actor_minstd, cfg.actor_maxstd)


def actor_sample(dist, spaces: Spaces, key, mode: bool):
    """One-hot [.., A] (straight-through) for discrete, a float vector for continuous."""
    if spaces.act_discrete:
        return nm.onehot_mode(dist) if mode else nm.onehot_sample(key, dist)
    mean, std = dist
    return mean if mode else nm.normal_sample(key, mean, std)


def actor_log_prob(dist, spaces: Spaces, act):
    if spaces.act_discrete:
        return nm.onehot_log_prob(dist, act)
    return nm.normal_log_prob(dist[0], dist[1], act)


def actor_entropy(dist, spaces: Spaces):
    if spaces.act_discrete:
        return nm.onehot_entropy(dist)
    return nm.normal_entropy(dist[1])


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


def policy(params, cfg: AgentConfig, spaces: Spaces, carry: dict, obs, is_first, key,
           mode: bool = False):
    """One acting step on a batch of envs (agent.py:129-164).

    obs [B, *obs_shape], is_first [B] -> (action [B] int32 | [B, A], new carry,
    latent {deter [B, D], stoch [B, S] int32} to store with the row for replay context).
    """
    k1, k2 = jax.random.split(key)
    embed = nets.encode(params["enc"], cfg, obs)
    prevact = embed_action(carry["action"], spaces)
    lat = {"deter": carry["deter"], "stoch": carry["stoch"]}
    lat, out = nets.obs_step(params["dyn"], cfg.rssm, lat, prevact, embed, is_first, k1, mode)
    dist = actor_out(params["actor"], cfg, spaces, nets.feat(out))
    act = actor_sample(dist, spaces, k2, mode)
    if spaces.act_discrete:
        act = jnp.argmax(act, -1).astype(jnp.int32)
    new_carry = {"deter": lat["deter"], "stoch": lat["stoch"], "action": act}
    latent = {"deter": out["deter"], "stoch": jnp.argmax(out["stoch"], -1).astype(jnp.int32)}
    return act, new_carry, latent


# ----------------------------------------------------------------------------- loss


def _bins(cfg: AgentConfig):
    return nm.twohot_bins(cfg.critic.bins)


def _value_mean(cfg: AgentConfig, logits, bins):
    """Expectation of a two-hot head in the configured summation (numerics.TWOHOT_MEANS)."""
    return nm.TWOHOT_MEANS[cfg.twohot_mean](logits, bins)


def _twohot_head(p, head_cfg, x):
    return nets.twohot_logits(p, x, head_cfg.layers, head_cfg.bins)


def _cont_logit(p, cfg: AgentConfig, x):
    return nets.head(p, x, cfg.conhead.layers)[..., 0]


def _balance_stats(pred_mean, loss, target, thres):
    """Reference jaxutils.balance_stats (:282-298); NaN where a class is absent."""
    pos = (target > thres).astype(f32)
    neg = (target <= thres).astype(f32)
    pred = (pred_mean > thres).astype(f32)
    return {
        "pos_loss": (loss * pos).sum() / pos.sum(),
        "neg_loss": (loss * neg).sum() / neg.sum(),
        "pos_acc": (pred * pos).sum() / pos.sum(),
        "neg_acc": ((1 - pred) * neg).sum() / neg.sum(),
        "rate": pos.mean(),
        "avg": target.mean(),
        "pred": pred_mean.mean(),
    }


def world_model(params, cfg: AgentConfig, spaces: Spaces, data: dict, carry: dict, key):
    """World-model half of Agent.loss (agent.py:229-249): observe the rows, decode, predict
    reward and continuation, KL terms. Needs only params enc, dyn, dec, rew, con.

    Returns dict(losses {obs_key, reward, cont, dyn, rep} each [B, T] unscaled, post
    {deter, stoch, logit} [B, T, ...], newlat, embed [B, T, E], feat, prevacts [B, T, A],
    dec (prediction in symlog/pixel space), rew_logits [B, T, K], con_logit [B, T], metrics).
    """
    bins = _bins(cfg)
    prevacts = jnp.concatenate([carry["action"][:, None], data["action"][:, :-1]], 1)
    prevacts = embed_action(prevacts, spaces)
    embed = nets.encode(params["enc"], cfg, data["obs"])
    lat0 = {"deter": carry["deter"], "stoch": carry["stoch"]}
    newlat, post = nets.observe(params["dyn"], cfg.rssm, lat0, prevacts, embed,
                                data["is_first"], key, cfg.sample_mode)
    x = nets.feat(post)
    losses = {}
    dec = nets.decode(params["dec"], cfg, post)
    if len(spaces.obs_shape) == 1:
        dist = (dec - nm.symlog(data["obs"].astype(f32))) ** 2
        dist = jnp.where(dist < 1e-8, 0.0, dist)  # TransformedMseDist tolerance
        losses[spaces.obs_key] = dist.sum(-1)
    else:
        losses[spaces.obs_key] = ((dec - data["obs"].astype(f32)) ** 2).sum((-3, -2, -1))
    rew_logits = _twohot_head(params["rew"], cfg.rewhead, x)
    losses["reward"] = -nm.twohot_log_prob(rew_logits, data["reward"].astype(f32), bins)
    con_logit = _cont_logit(params["con"], cfg, x)
    cont_data = 1.0 - data["is_terminal"].astype(f32)
    label = cont_data * (1 - 1 / cfg.horizon) if cfg.contdisc else cont_data
    losses["cont"] = -nm.bernoulli_log_prob(con_logit, label)
    dyn, rep, metrics = nets.rssm_kl_losses(params["dyn"], cfg.rssm, post, cfg.free_nats)
    losses["dyn"], losses["rep"] = dyn, rep
    return dict(losses=losses, post=post, newlat=newlat, embed=embed, feat=x,
                prevacts=prevacts, dec=dec, rew_logits=rew_logits, con_logit=con_logit,
                metrics=metrics)



def imagine(params, cfg: AgentConfig, spaces: Spaces, start: dict, key, mode: bool):
    """Roll the prior forward imag_length steps from every start state (agent.py:252-282).

    start {deter [N, D], stoch [N, S, C], logit [N, S, C]} -> (traj with [N, H+1, ...],
    acts [N, H+1, A]); index 0 is the start state and the action taken there. No gradient
    flows through the rollout (its outputs are only used under stop_gradient), so the
    params are stop-gradiented here to spare the backward pass.
    """
    params = sg(params)
    H = cfg.imag_length
    k0, kscan = jax.random.split(key)
    dist0 = actor_out(params["actor"], cfg, spaces, nets.feat(start))
    act0 = actor_sample(dist0, spaces, k0, mode)

    def step(carry, k):
        lat, act = carry
        ka, kb = jax.random.split(k)
        lat, out = nets.img_step(params["dyn"], cfg.rssm, lat, act, ka, mode)
        dist = actor_out(params["actor"], cfg, spaces, nets.feat(out))
        act = actor_sample(dist, spaces, kb, mode)
        return (lat, act), (out, act)

    init = sg(({"deter": start["deter"], "stoch": start["stoch"]}, act0))
    _, (outs, acts) = jax.lax.scan(step, init, jax.random.split(kscan, H))
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    traj = jax.tree.map(
        lambda first, seq: jnp.concatenate([first[:, None], swap(seq)], 1),
        {k: start[k] for k in ("deter", "stoch", "logit")}, outs)
    acts = jnp.concatenate([act0[:, None], swap(acts)], 1)
    return sg(traj), sg(acts)


def loss_fn(params, slow, retnorm: RetNormState, cfg: AgentConfig, spaces: Spaces,
            data: dict, carry: dict, key):
    """Agent.loss (agent.py:225-399) on trained rows.

    data: obs [B, T, *obs], action [B, T], reward/is_first/is_last/is_terminal [B, T];
    carry: {deter [B, D], stoch [B, S, C], action [B] | [B, A]} from the context row.
    Returns (total, aux) with aux = dict(losses (scaled, per element), outs, carry, metrics,
    retnorm (updated state)).
    """
    B, T = data["is_first"].shape
    mode = cfg.sample_mode
    k_obs, k_img = jax.random.split(key)
    horizon = cfg.horizon
    bins = _bins(cfg)
    cont_data = 1.0 - data["is_terminal"].astype(f32)
    wm = world_model(params, cfg, spaces, data, carry, k_obs)
    losses, metrics = dict(wm["losses"]), dict(wm["metrics"])
    post, newlat, embed, x = wm["post"], wm["newlat"], wm["embed"], wm["feat"]
    rew_logits, con_logit, prevacts = wm["rew_logits"], wm["con_logit"], wm["prevacts"]

    # Imagination from every posterior state.
    flat = lambda v: v.reshape((B * T, *v.shape[2:]))  # noqa: E731
    start = jax.tree.map(flat, post)
    traj, acts = imagine(params, cfg, spaces, start, k_img, mode)
    tfeat = nets.feat(traj)
    rew = jnp.concatenate([
        flat(data["reward"].astype(f32))[:, None],
        _value_mean(cfg, _twohot_head(params["rew"], cfg.rewhead, tfeat[:, 1:]), bins)], 1)
    con = jnp.concatenate([
        flat(cont_data)[:, None],
        nm.bernoulli_mean(_cont_logit(params["con"], cfg, tfeat[:, 1:]))], 1)
    rew, con = sg(rew), sg(con)
    inp = sg(tfeat)
    adist = actor_out(params["actor"], cfg, spaces, inp)
    critic_logits = _twohot_head(params["critic"], cfg.critic, inp)
    slow_logits = _twohot_head(slow, cfg.critic, inp)
    val = _value_mean(cfg, critic_logits, bins)
    slowval = sg(_value_mean(cfg, slow_logits, bins))
    tarval = sg(val)
    ret, weight = imagined_returns(
        rew, con, tarval, cfg.return_lambda, cfg.contdisc, horizon)
    ret, weight = sg(ret), sg(weight)

    # Actor: REINFORCE with normalised advantages and an entropy bonus.
    retnorm = retnorm_update(retnorm, ret, cfg.retnorm)
    roffset, rscale = retnorm_stats(retnorm, cfg.retnorm)
    adv = (ret - tarval[:, :-1]) / rscale
    logpi = actor_log_prob(adist, spaces, sg(acts))[:, :-1]
    ent = actor_entropy(adist, spaces)[:, :-1]
    losses["actor"] = weight[:, :-1] * -(logpi * sg(adv) + cfg.actent * ent)

    # Critic on imagined returns, regularised towards the slow critic.
    ret_padded = jnp.concatenate([ret, jnp.zeros_like(ret[:, -1:])], 1)
    critic_lp = (nm.twohot_log_prob(critic_logits, ret_padded, bins)
                 + cfg.slowreg * nm.twohot_log_prob(critic_logits, slowval, bins))
    losses["critic"] = weight[:, :-1] * -critic_lp[:, :-1]

    # Replay critic: lambda returns on the replayed rows, bootstrapped from imagination.
    if cfg.replay_critic_loss:
        rc_logits = _twohot_head(params["critic"], cfg.critic, x)
        rslowval = sg(_value_mean(cfg, _twohot_head(slow, cfg.critic, x), bins))
        boot = ret[:, 0].reshape((B, T))
        replay_ret = sg(replay_return(
            data["reward"].astype(f32), boot, data["is_terminal"], data["is_last"],
            cfg.return_lambda_replay, horizon))
        rpad = jnp.concatenate([replay_ret, jnp.zeros_like(replay_ret[:, -1:])], 1)
        rc_lp = (nm.twohot_log_prob(rc_logits, rpad, bins)
                 + cfg.slowreg * nm.twohot_log_prob(rc_logits, rslowval, bins))
        live = 1.0 - data["is_last"].astype(f32)
        losses["replay_critic"] = live[:, :-1] * -rc_lp[:, :-1]

    # Metrics (agent.py:354-389).
    metrics.update({f"{k}_loss": v.mean() for k, v in losses.items()})
    metrics.update({f"{k}_loss_std": v.std() for k, v in losses.items()})
    metrics.update(nm.tensorstats(adv, "adv"))
    metrics.update(nm.tensorstats(rew, "rew"))
    metrics.update(nm.tensorstats(weight, "weight"))
    metrics.update(nm.tensorstats(val, "val"))
    metrics.update(nm.tensorstats(ret, "ret"))
    metrics.update(nm.tensorstats((ret - roffset) / rscale, "ret_normed"))
    if cfg.replay_critic_loss:
        metrics.update(nm.tensorstats(replay_ret, "replay_ret"))
    metrics["td_error"] = jnp.abs(ret - val[:, :-1]).mean()
    metrics["ret_rate"] = (jnp.abs(ret) > 1.0).astype(f32).mean()
    act_stat = jnp.argmax(acts, -1).astype(f32) if spaces.act_discrete else acts
    metrics.update(nm.tensorstats(act_stat, "act/action"))
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
    rstats = _balance_stats(_value_mean(cfg, rew_logits, bins), losses["reward"], data_rew, 0.1)
    metrics.update({f"rewstats/{k}": v for k, v in rstats.items()})
    cstats = _balance_stats(nm.bernoulli_mean(con_logit),
                            -nm.bernoulli_log_prob(con_logit, cont_data), cont_data, 0.5)
    metrics.update({f"constats/{k}": v for k, v in cstats.items()})
    metrics["activation/embed"] = jnp.abs(embed).mean()

    scales = _loss_scales(cfg, spaces)
    scaled = {k: v * scales[k] for k, v in losses.items()}
    total = jnp.stack([v.mean() for v in scaled.values()]).sum()
    new_carry = {"deter": newlat["deter"], "stoch": newlat["stoch"],
                 "action": data["action"][:, -1]}
    aux = {
        "losses": scaled,
        "post": post,
        "embed": embed,
        "prevacts": prevacts,
        "carry": new_carry,
        "metrics": metrics,
        "retnorm": retnorm,
        "diag": {
            "traj": traj, "acts": acts, "rew": rew, "con": con, "val": val,
            "slowval": slowval, "weight": weight, "critic_logits": critic_logits,
            "slow_logits": slow_logits, "ret": ret, "offset": roffset,
            "scale": rscale, "adv": adv, "logpi": logpi, "ent": ent,
            "replay_ret": replay_ret if cfg.replay_critic_loss else None,
            "boot": boot if cfg.replay_critic_loss else None,
        },
    }
    return total, aux


def _loss_scales(cfg: AgentConfig, spaces: Spaces) -> dict:
    s = cfg.loss_scales
    return {
        spaces.obs_key: s.dec, "reward": s.reward, "cont": s.cont, "dyn": s.dyn,
        "rep": s.rep, "actor": s.actor, "critic": s.critic, "replay_critic": s.replay_critic,
    }


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
    data = {k: batch[k][:, 1:] for k in keys}
    return carry, data


def update(state: AgentState, cfg: AgentConfig, spaces: Spaces, batch: dict, key):
    """One train step (Agent.train): loss, gradients, optimiser, slow critic.

    batch: obs [B, 1+T, *obs], action, reward, is_first, is_last, is_terminal [B, 1+T],
    deter [B, 1+T, D] f32, stoch [B, 1+T, S] int32 (replay context latents).
    Returns (state, outs, metrics); outs['replay'] holds the posterior latents of rows 1..T
    for write-back ({deter [B, T, D], stoch [B, T, S] int32}) and outs['carry'] the final
    posterior carry.
    """
    carry, data = split_context(cfg, spaces, batch)

    def lossf(params):
        return loss_fn(params, state.slow, state.retnorm, cfg, spaces, data, carry, key)

    (total, aux), grads = jax.value_and_grad(lossf, has_aux=True)(state.params)
    opt = optimizer(cfg)
    updates, opt_state = opt.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    step = state.step + 1
    slow, count = slow_update(state.slow, params["critic"], state.updates,
                              cfg.slow_critic_fraction, cfg.slow_critic_update)
    metrics = dict(aux["metrics"])
    metrics["opt_loss"] = total
    metrics.update(optimizer_metrics(grads, updates, params, step))
    new_state = AgentState(params=params, slow=slow, opt_state=opt_state,
                           retnorm=aux["retnorm"], step=step, updates=count)
    post = aux["post"]
    outs = {
        "replay": {"deter": post["deter"],
                   "stoch": jnp.argmax(post["stoch"], -1).astype(jnp.int32)},
        "carry": aux["carry"],
    }
    return new_state, outs, metrics


def param_counts(params: dict) -> dict:
    """Optimised variables per module, as the reference's optimizer prints them."""
    counts = {k: nets.param_count(params[k]) for k in MODULES}
    counts["total"] = sum(counts.values())
    return counts
