"""The agent fixture families of tests/data/reference read into our terms: the files of a
family by its suffix, the config from its yaml (an option we do not implement refused by
name), the spaces and the sampling from its arrays, the parameters by the reference's paths
and the replay batches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config import dotted as config_dotted
from dreamerjax.config import resolve as config_resolve
from dreamerjax.config.defaults import (
    NORM_IMPLS,
    REF_29EB964,
    SCHEDULES,
    AgentConfig,
    Reference,
)
from dreamerjax.run import records

NON_OBS = ("action", "reward", "is_first", "is_last", "is_terminal", "deter", "stoch",
           "stepid")


def _load(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


def suffix_of(name: str, stem: str) -> str:
    """'ac_loss_cont_eps.npz', 'ac_loss' -> '_cont_eps'."""
    return name[len(stem):-len(".npz")]


def config_path(directory: str, stem: str, sfx: str) -> str:
    """The yaml of a family; variants without their own (centered) share the plain one."""
    path = os.path.join(directory, f"{stem}{sfx}.yaml")
    if os.path.exists(path):
        return path
    for short in (sfx.rsplit("_", 1)[0], ""):
        path = os.path.join(directory, f"{stem}{short}.yaml")
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no {stem}{sfx}.yaml or {stem}.yaml in {directory}")


# Reference options with a single implemented value: (yaml path, accepted values).
_FIXED = (
    ("enc.typ", ("simple",)), ("dec.typ", ("simple",)), ("dyn.typ", ("rssm",)),
    ("dyn.rssm.cell", ("blockgru",)), ("dyn.rssm.norm", ("rms",)), ("dyn.rssm.act", ("silu",)),
    ("enc.simple.norm", ("rms",)), ("enc.simple.act", ("silu",)),
    ("dec.simple.norm", ("rms",)), ("dec.simple.act", ("silu",)),
    ("dec.simple.vecdist", ("symlog_mse",)), ("dec.simple.space_hidden", (0,)),
    ("dec.simple.inputs", (["deter", "stoch"],)),
    ("actor_dist_disc", ("onehot",)), ("actor_dist_cont", ("normal",)),
    ("rewhead.dist", ("symexp_twohot",)), ("critic.dist", ("symexp_twohot",)),
    ("conhead.dist", ("binary",)), ("retnorm.impl", ("perc",)),
    ("valnorm.impl", (False, *NORM_IMPLS[REF_29EB964])),
    ("advnorm.impl", (False, *NORM_IMPLS[REF_29EB964])),
    ("ac_grads", ("none", False)), ("imag_start", ("all",)), ("imag_repeat", (1,)),
    ("slowtar", (False,)), ("reward_grad", (True,)), ("replay_critic_grad", (True,)),
    ("replay_critic_bootstrap", ("imag",)), ("replay_context", (1,)),
    ("reset_context", (0, 0.0)), ("opt.scaler", ("rms",)), ("opt.momentum", (True,)),
    ("opt.schedule", SCHEDULES[REF_29EB964]),
    ("jax.compute_dtype", ("float32",)), ("jax.param_dtype", ("float32",)),
)


def _get(y: dict, path: str):
    node = y
    for part in path.split("."):
        node = node[part]
    return node


def _check_fixed(y: dict, name: str) -> None:
    """ValueError naming the first option of the fixture's config that we do not implement
    with a value other than the one we do (_FIXED)."""
    for key, accepted in _FIXED:
        try:
            value = _get(y, key)
        except KeyError:
            continue
        if value not in accepted:
            raise ValueError(f"{name}: {key} = {value!r} is not implemented "
                             f"(only {accepted[0]!r})")


def config_from_yaml(path: str, **overrides) -> AgentConfig:
    """The agent config a fixture was made with, from its full flattened config yaml read
    through config/keys (the one map of the reference's names); an option we do not
    implement with a non-default value raises ValueError naming the key."""
    with open(path) as f:
        y = yaml.safe_load(f)
    _check_fixed(y, os.path.basename(path))
    cfg = config_resolve.agent_from_reference(config_dotted.load_file(path), REF_29EB964)
    return dataclasses.replace(cfg, sample_mode=True, **overrides)


def yaml_spaces(path: str) -> tuple[str, str]:
    with open(path) as f:
        y = yaml.safe_load(f)
    return str(y["enc"]["spaces"]), str(y["dec"]["spaces"])


def spaces_from(arrays: dict, prefix: str, params: dict, regexes: tuple[str, str]):
    """Spaces of a fixture: observation keys from the `{prefix}<key>` arrays [B, T, *shape]
    in their stored dtype (in sorted key order: with one key of each rank the order does
    not matter, the encoder puts vectors first); actions discrete when stored as integers,
    their count from the actor's output kernel (or the one-hot previous actions)."""
    obs = []
    for key in sorted(arrays):
        if not key.startswith(prefix) or key[len(prefix):] in NON_OBS:
            continue
        x = arrays[key]
        obs.append((key[len(prefix):], tuple(x.shape[2:]), str(x.dtype)))
    action = arrays[prefix + "action"]
    discrete = bool(np.issubdtype(action.dtype, np.integer))
    kernel = [v for k, v in params.items() if k.endswith("agent/actor/action/out/kernel")]
    if kernel:
        act_dim = int(kernel[0].shape[-1])
    elif discrete:
        prev = [v for k, v in arrays.items() if k in ("diag_prevacts", "prevacts_action")]
        act_dim = int(prev[0].shape[-1])
    else:
        act_dim = int(action.shape[-1])
    return agent_lib.Spaces(tuple(obs), discrete, act_dim, *regexes)


def actor_noise(d: dict) -> float:
    """The continuous actor's sample in the fixture as mean + noise * std; 0 is the mode.
    Measured from the stored imagined actions and the actor's mean and std."""
    if "diag_imag_actor_std" not in d:
        return 0.0
    z = (d["diag_imag_action"].astype(np.float64) - d["diag_imag_actor_mean"]) / (
        d["diag_imag_actor_std"])
    noise = float(np.round(np.median(z), 3))
    if np.abs(z - noise).max() > 1e-3:
        raise ValueError("the fixture's continuous actions are not mean + constant * std")
    return noise


@contextlib.contextmanager
def deterministic_actor(noise: float | None):
    """The fixtures' continuous actor sampling (None: a discrete actor, nothing to do).

    noise > 0: samples become mean + noise * std (the driver's patch of
    tfd.Normal._sample_n: eps * scale + loc with a constant eps). noise == 0: samples are
    the mean, and the reference's actor mean in the loss was bit-identical to the one
    sampled in its imagination scan, so d logpi / d mean was exactly 0 and the mean head
    did not move (README (j)). Our scan and our batched loss evaluate the actor with
    different fusions (1-ulp differences), which the first RMS step (u = g / |g|) would
    turn into a full lr step; the log-probability is therefore taken at the loss's own
    (stop-gradient) mean, the value the reference's action had bit for bit."""
    if noise is None:
        yield
        return
    sample0, log_prob0 = agent_lib.actor_sample, agent_lib.actor_log_prob

    def sample(dist, spaces, key, mode):
        if spaces.act_discrete or not mode or not noise:
            return sample0(dist, spaces, key, mode)
        mean, std = dist
        return noise * std + mean

    def log_prob(dist, spaces, act, version=Reference.V29EB964):
        if not spaces.act_discrete and not noise:
            act = jax.lax.stop_gradient(jnp.broadcast_to(dist[0], act.shape))
        return log_prob0(dist, spaces, act, version)

    agent_lib.actor_sample, agent_lib.actor_log_prob = sample, log_prob
    try:
        yield
    finally:
        agent_lib.actor_sample, agent_lib.actor_log_prob = sample0, log_prob0


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


def _obs_batch(d: dict, prefix: str, spaces) -> dict:
    return {k: d[prefix + k] for k in spaces.obs_keys}


def batch_from(d: dict, prefix: str, spaces) -> dict:
    return {
        "obs": _obs_batch(d, prefix, spaces), "action": d[prefix + "action"],
        "reward": d[prefix + "reward"], "is_first": d[prefix + "is_first"],
        "is_last": d[prefix + "is_last"], "is_terminal": d[prefix + "is_terminal"],
        "deter": d[prefix + "deter"], "stoch": d[prefix + "stoch"],
    }


__all__ = ["batch_from", "config_from_yaml", "deterministic_actor", "flatten", "nest",
           "spaces_from"]
