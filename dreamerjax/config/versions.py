"""The configuration keys of the reference's HEAD (e3f0224) beside those of 29eb964.

`keys.py` resolves every run in 29eb964's spelling (its KEYS table, docs/config.md). With
`reference = e3f0224` a run is configured in HEAD's spelling instead (configs.yaml
@e3f0224: the agent's keys under `agent.`, `policy` / `value` for the actor and critic,
`loss_scales.rec`, `imag_loss.lam`, `slowvalue.rate`, ...): each HEAD key is translated
here to the internal key(s) it sets, HEAD's named configs and defaults replace 29eb964's,
and a key that exists in only one version is refused in the other with the reason.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dreamerjax.config.defaults import (
    DEFAULT_SIZE,
    HEAD_REF,
    HEAD_SIZES,
    TINY,
    Config,
    agent_config,
)


def _same(prefix_head: str, prefix_ours: str, names) -> dict[str, tuple[str, ...]]:
    return {f"{prefix_head}.{n}": (f"{prefix_ours}.{n}",) for n in names}


_HEADS = ("layers", "units", "outscale")

# HEAD key (configs.yaml @e3f0224, line) -> the internal (29eb964-spelled) keys it sets.
HEAD_ALIASES: dict[str, tuple[str, ...]] = {
    "run.envs": ("run.num_envs",),  # :55
    "agent.loss_scales.rec": ("loss_scales.dec_cnn", "loss_scales.dec_mlp"),  # :86
    **{f"agent.loss_scales.{h}": (f"loss_scales.{o}",) for h, o in (
        ("rew", "reward"), ("con", "cont"), ("dyn", "dyn"), ("rep", "rep"),
        ("policy", "actor"), ("value", "critic"), ("repval", "replay_critic"))},
    **_same("agent.opt", "opt", ("lr", "eps", "warmup", "agc", "beta1", "beta2", "wd",
                                 "schedule", "anneal")),  # :87
    **_same("agent.dyn.rssm", "dyn.rssm", (  # :91
        "deter", "hidden", "stoch", "classes", "unimix", "outscale", "imglayers",
        "obslayers", "dynlayers", "absolute", "blocks")),
    "agent.dyn.rssm.free_nats": ("rssm_loss.free",),
    **_same("agent.enc.simple", "enc.simple", (  # :94
        "depth", "mults", "layers", "units", "symlog", "kernel")),
    **_same("agent.dec.simple", "dec.simple", ("depth", "mults", "layers", "units", "kernel")),
    # One output scale for the vector head and the image output (rssm.py:304,340-348).
    "agent.dec.simple.outscale": ("dec.simple.outscale", "dec.simple.vec_outscale"),  # :97
    "agent.dec.simple.bspace": ("dec.simple.block_space",),
    **_same("agent.rewhead", "rewhead", (*_HEADS, "bins")),  # :98
    **_same("agent.conhead", "conhead", _HEADS),  # :99
    **_same("agent.policy", "actor", (*_HEADS, "minstd", "maxstd")),  # :100
    **_same("agent.value", "critic", (*_HEADS, "bins")),  # :101
    "agent.imag_length": ("imag_length",),  # :105
    "agent.horizon": ("horizon",),  # :106
    "agent.contdisc": ("contdisc",),  # :107
    "agent.imag_loss.lam": ("return_lambda",),  # :108
    "agent.imag_loss.actent": ("actent",),
    "agent.imag_loss.slowreg": ("slowreg",),
    "agent.repl_loss.lam": ("return_lambda_replay",),  # :109
    "agent.slowvalue.rate": ("slow_critic_fraction",),  # :110
    "agent.slowvalue.every": ("slow_critic_update",),
    **_same("agent.retnorm", "retnorm", ("rate", "limit", "perclo", "perchi")),  # :111
    **_same("agent.valnorm", "valnorm", ("impl", "rate", "limit")),  # :112
    **_same("agent.advnorm", "advnorm", ("impl", "rate", "limit")),  # :113
    "agent.repval_loss": ("replay_critic_loss",),  # :115
}

# Internal keys spelled the same at HEAD. logger.outputs / logger.filter are HEAD's own
# keys (configs.yaml:23-24); enc/dec.spaces choose the observation keys the agent sees,
# which HEAD's dmc_vision does through env.dmc.proprio (configs.yaml:186).
SHARED_PREFIXES = ("env.atari.", "env.atari100k.", "env.crafter.", "env.dmc.",
                   "env.loconav.", "env.procgen.")
SHARED = ("task", "run.steps", "run.eval_eps", "run.train_ratio", "replay.size", "batch_size",
          "batch_length", "replay_context", "jax.compute_dtype", "run.driver_parallel",
          "jax.train_devices", "run.from_checkpoint", "logger.outputs", "logger.filter",
          "enc.spaces", "dec.spaces",
          "replay.fracs.uniform", "replay.fracs.priority", "replay.fracs.recency",
          "replay.prio.exponent", "replay.prio.maxfrac", "replay.prio.initial",
          "replay.prio.zero_on_sample", "replay.recexp")

_ONE = "only this value is implemented"
_NET = ("agent.dyn.rssm", "agent.enc.simple", "agent.dec.simple", "agent.rewhead",
        "agent.conhead", "agent.policy", "agent.value")

# HEAD keys with one implemented value (HEAD's default): accepted at it, refused otherwise.
HEAD_FIXED: dict[str, tuple[Any, str]] = {
    **{f"{p}.{k}": (v, _ONE) for p in _NET
       for k, v in (("act", "silu"), ("norm", "rms"), ("winit", "trunc_normal_in"))},
    **{f"agent.{m}.typ": (v, _ONE) for m, v in (("enc", "simple"), ("dec", "simple"),
                                                ("dyn", "rssm"))},
    **{f"agent.{m}.simple.{k}": (False, "HEAD's default CNN (max-pool / repeat stages)")
       for m in ("enc", "dec") for k in ("outer", "strided")},
    "agent.policy_dist_disc": ("categorical", _ONE),
    "agent.policy_dist_cont": ("bounded_normal", _ONE),
    "agent.rewhead.output": ("symexp_twohot", _ONE),
    "agent.value.output": ("symexp_twohot", _ONE),
    "agent.conhead.output": ("binary", _ONE),
    "agent.policy.unimix": (0.01, "HEAD's categorical policy does not read it "
                                  "(heads.py:101-110 @e3f0224)"),
    "agent.retnorm.impl": ("perc", _ONE),
    "agent.retnorm.debias": (False, _ONE),
    "agent.ac_grads": (False, _ONE),
    "agent.reward_grad": (True, _ONE),
    "agent.repval_grad": (True, _ONE),
    "agent.imag_last": (0, "imagination starts from every replayed posterior"),
    "agent.imag_loss.slowtar": (False, _ONE),
    "agent.repl_loss.slowtar": (False, _ONE),
    "agent.repl_loss.slowreg": (1.0, "one slowreg for both losses (agent.imag_loss.slowreg)"),
    "agent.opt.momentum": (True, _ONE),
    "consec_train": (1, _ONE),
    "replay.online": (True, "the replay always serves its online queue first"),
    "replay.priosignal": ("model", "e3f0224 writes no priorities back, agent.py:151-152"),
}


# Internal keys that a run of e3f0224 can never set (HEAD's spelling has no key for them
# and their flags are refused there) and whose value its agent fixes, with the reason:
# its defaults hold these values. Another value in an e3f0224 config comes from a
# 29eb964 config whose `reference` alone was replaced, whose parts then disagree about
# the version (validate.validate refuses it). The other direction cannot be told apart: a
# 29eb964 run may set every one of its keys to e3f0224's values.
E3F0224_FIXED_FIELDS: dict[str, tuple[Any, str]] = {
    **{f"{m}.simple.outer": (False, "its CNN has no outer stage, configs.yaml:94, 97")
       for m in ("enc", "dec")},
    **{f"{m}.simple.minres": (4, "its CNN's final side comes from the image, "
                                 "rssm.py:242-243, 309-312") for m in ("enc", "dec")},
    "dec.simple.hidden_stoch": (True, "its image decoder always has the hidden stoch "
                                      "layer, rssm.py:324-325"),
    "actor.unimix": (0.0, "its categorical policy has no unimix, heads.py:101-110"),
    "opt.pmin": (1e-3, "its AGC's pmin is fixed, embodied/jax/opt.py:109"),
}


def head_table(our_keys, internal_keys) -> dict[str, tuple[str, ...]]:
    """Every key a HEAD run accepts -> the internal keys it sets: HEAD's aliases, the keys
    both versions spell alike (of `internal_keys`), and dreamerjax's own keys."""
    same = [k for k in internal_keys if shared(k)]
    return {**HEAD_ALIASES, **{k: (k,) for k in same}, **{k: (k,) for k in our_keys}}


def shared(key: str) -> bool:
    return key in SHARED or key.startswith(SHARED_PREFIXES)


def spelled_at_head(internal: str) -> str | None:
    """HEAD's spelling of an internal (29eb964) key, if HEAD has one."""
    for head, targets in HEAD_ALIASES.items():
        if internal in targets:
            return head
    return None


def refusal(key: str, reference: str, our_keys) -> str | None:
    """Why a key of the other version is refused in this one, or None."""
    if reference == HEAD_REF:
        if key in our_keys or shared(key):
            return None
        head = spelled_at_head(key)
        if head is not None:
            return f"{key!r} is 29eb964's spelling; at {HEAD_REF} it is {head!r}"
        return None
    if key in HEAD_ALIASES or key in HEAD_FIXED:
        ours = HEAD_ALIASES.get(key, ())
        also = f"; at 29eb964 it is {' and '.join(repr(k) for k in ours)}" if ours else ""
        return f"{key!r} is a key of {HEAD_REF} (give --reference {HEAD_REF}){also}"
    return None


def _size(deter: int, hidden: int, classes: int, depth: int, units: int) -> dict:
    # configs.yaml:120-158 @e3f0224: `.*\.rssm`, `.*\.depth`, `.*\.units`.
    return {"agent.dyn.rssm.deter": deter, "agent.dyn.rssm.hidden": hidden,
            "agent.dyn.rssm.classes": classes, r"agent\..*\.depth": depth,
            r"agent\..*\.units": units}


# Named configs of HEAD (configs.yaml @e3f0224, the lines given; only keys that apply).
HEAD_NAMED: dict[str, dict[str, Any]] = {
    **{f"size{name}": _size(**s) for name, s in HEAD_SIZES.items()},
    "tiny": {"agent.dyn.rssm.deter": TINY["deter"], "agent.dyn.rssm.hidden": TINY["hidden"],
             "agent.dyn.rssm.classes": TINY["classes"], "agent.dyn.rssm.stoch": TINY["stoch"],
             r"agent\..*\.units": TINY["units"], r"agent\..*\.depth": TINY["depth"]},
    "atari": {"task": "atari_pong", "run.steps": 5.1e7, "run.train_ratio": 32},  # :162
    "atari100k": {"task": "atari100k_pong", "run.steps": 1.1e5, "run.envs": 1,  # :170
                  "run.train_ratio": 256},
    "crafter": {"task": "crafter_reward", "run.steps": 1.1e6, "run.envs": 1,  # :174
                "run.train_ratio": 512},
    "dmc_proprio": {**_size(**HEAD_SIZES["1m"]), "task": "dmc_walker_walk",  # :178
                    "env.dmc.image": False, "run.steps": 1.1e6, "run.train_ratio": 1024},
    # :184; env.dmc.proprio False: the agent sees the image only (our enc/dec.spaces).
    "dmc_vision": {"task": "dmc_walker_walk", "enc.spaces": "image", "dec.spaces": "image",
                   "run.steps": 1.1e6, "run.train_ratio": 256},
    "loconav": {"task": "loconav_ant_maze_m", "env.loconav.repeat": 1,  # :193
                "run.train_ratio": 256},
    "procgen": {"task": "procgen_coinrun", "run.steps": 1.1e8,  # :166
                "run.train_ratio": 64},
    # :189, without run.save_every (seconds of wall clock there).
    "bsuite": {"task": "bsuite_mnist/0", "run.envs": 1, "run.train_ratio": 1024},
    "debug": {"batch_size": 8, "batch_length": 10, "run.envs": 4,  # :204-225
              "run.train_ratio": 8, "replay.size": 1e4, r"agent\..*\.bins": 5,
              r"agent\..*\.layers": 1, r"agent\..*\.units": 8, "agent.dyn.rssm.stoch": 2,
              "agent.dyn.rssm.classes": 4, "agent.dyn.rssm.deter": 8,
              "agent.dyn.rssm.hidden": 3, "agent.dyn.rssm.blocks": 4,
              r"agent\..*\.depth": 2},
}


def default_config(reference: str) -> Config:
    """The defaults of a run of `reference`: at HEAD its agent (defaults.head_defaults) and
    its environment settings (configs.yaml:30-37 @e3f0224: Atari 96 x 96 with 30 no-ops,
    Atari100k the needed actions and 30 no-ops, DMC and LocoNav action repeat 1, ProcGen
    96 x 96) and Memory Maze's image-only observation (dreamerv3/main.py:232-233 @e3f0224)."""
    if reference != HEAD_REF:
        return Config()
    base = Config()
    rep = dataclasses.replace
    env = base.env
    env = rep(env, atari=rep(env.atari, size=(96, 96), noops=30),
              atari100k=rep(env.atari100k, noops=30, actions="needed"),
              dmc=rep(env.dmc, repeat=1), loconav=rep(env.loconav, repeat=1),
              procgen=rep(env.procgen, size=(96, 96)),
              memmaze=rep(env.memmaze, extra_obs=False))
    return rep(base, agent=agent_config(DEFAULT_SIZE, reference=HEAD_REF), env=env)
