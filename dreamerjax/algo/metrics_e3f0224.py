"""e3f0224's loss terms by its names and order, and its metrics of Agent.loss, of the whole
batch under a data-parallel axis (agent.py:156-245, 424-442 @e3f0224).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.algo.spaces import Spaces
from dreamerjax.config.defaults import AgentConfig

f32 = jnp.float32


# Our loss terms by e3f0224's names (agent.py:156-245 @e3f0224); decoder keys keep theirs.
E3F0224_LOSS_NAMES = {"reward": "rew", "cont": "con", "actor": "policy", "critic": "value",
                      "replay_critic": "repval"}
# e3f0224's optimizer metrics by their names (embodied/jax/opt.py:73-79 @e3f0224) -> ours
# (optim.OPT_METRICS, OPT_RMS_METRICS): its window counter `opt/updates` is our grad steps.
E3F0224_OPT_NAMES = {"opt/loss": "opt_loss", "opt/grad_norm": "opt_grad_norm",
                     "opt/updates": "opt_grad_steps", "opt/param_count": "opt_param_count",
                     "opt/grad_rms": "opt_grad_rms", "opt/update_rms": "opt_update_rms",
                     "opt/param_rms": "opt_param_rms"}


def e3f0224_loss_order(spaces: Spaces, losses: dict) -> list[str]:
    """e3f0224's order of the loss terms, in which it sums the total (agent.py:166-240
    @e3f0224)."""
    order = ["dyn", "rep", "reward", "cont", *spaces.dec_keys, "actor", "critic",
             "replay_critic"]
    return [k for k in order if k in losses]


def batch_stats(data_axis: str | None):
    """(mean, std, min, max) of a tensor over the whole batch: the tensor's own on one
    device; under data_axis, over every shard's part of it (equal parts), as HEAD computes
    its metrics on the batch sharded over its data axes (embodied/jax/agent.py:144-148
    @e3f0224, jit over the mesh)."""
    if data_axis is None:
        return jnp.mean, jnp.std, jnp.min, jnp.max

    def mean(x):
        return jax.lax.pmean(jnp.mean(x), data_axis)

    def std(x):
        m = mean(x)
        return jnp.sqrt(jnp.maximum(mean(jnp.square(x)) - m * m, 0.0))

    return (mean, std, lambda x: jax.lax.pmin(jnp.min(x), data_axis),
            lambda x: jax.lax.pmax(jnp.max(x), data_axis))


def loss_metrics_e3f0224(cfg: AgentConfig, spaces: Spaces, wm: dict, img: dict,
                         parts: dict, losses: dict, data_axis: str | None = None) -> dict:
    """HEAD's metrics of Agent.loss (rssm.py:131-132, agent.py:424-442 and 239
    @e3f0224), plus our `<term>_loss` means that the driver and the plots read (the
    status line reads `ent/action` by this name: status.STATUS_METRICS). Under data_axis
    they are those of the whole batch (`batch_stats`)."""
    mean, std, min_, max_ = batch_stats(data_axis)
    metrics = {k: mean(v) for k, v in wm["metrics"].items()}  # means over the batch
    adv, ret = parts["adv"], img["ret"]
    slowval = img["slowval"]
    if "vstats" in img:  # valnorm on: the slow critic's value as val (agent.py:396)
        slowval = slowval * img["vstats"][1] + img["vstats"][0]
    ret_normed = (ret - parts["offset"]) / parts["scale"]
    metrics.update({
        "adv": mean(adv), "adv_std": std(adv), "adv_mag": mean(jnp.abs(adv)),
        "rew": mean(img["rew"]), "con": mean(img["con"]), "ret": mean(ret_normed),
        "val": mean(img["val"]), "tar": mean(parts.get("tar", ret)),
        "weight": mean(img["weight"]), "slowval": mean(slowval), "ret_min": min_(ret_normed),
        "ret_max": max_(ret_normed),
        "ret_rate": mean((jnp.abs(ret_normed) >= 1.0).astype(f32)),
        "ent/action": mean(parts["ent"])})
    if spaces.act_discrete:  # the continuous policy's Agg hides minent (agent.py:440)
        metrics["rand/action"] = mean(parts["ent"]) / np.log(spaces.act_dim)
    for k, v in losses.items():
        metrics[f"loss/{E3F0224_LOSS_NAMES.get(k, k)}"] = mean(v)
        metrics[f"{k}_loss"] = mean(v)
    return metrics
