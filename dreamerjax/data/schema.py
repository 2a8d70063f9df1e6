"""The row schema: the one place that says what an env row, a replay row and a training
batch hold. The collector, the replay, the training step and the agent's example inputs
all derive their structures from these functions.

    env row     obs, reward f32, is_first / is_last / is_terminal bool
    replay row  env row + action (int32 [] or f32 [A]) + deter f32 [D] + stoch int32 [S]
    batch       replay row with leading [B, L] (L = batch_length + replay_context)

`obs` is the observation as the agent's `Spaces` describe it (its dtype is the stored one:
the agent converts where the reference does).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

SD = jax.ShapeDtypeStruct

FLAGS = ("is_first", "is_last", "is_terminal")
"""Boolean row flags, in the order the collector writes them."""


def obs_spec(spaces, lead: tuple[int, ...] = ()):
    """The observation entry of a row: a dict {name: ShapeDtypeStruct} over the agent's
    observation keys, with leading axes `lead`."""
    if not hasattr(spaces, "obs"):  # single-array Spaces (obs_shape), before dict observations
        return SD((*lead, *spaces.obs_shape), jnp.float32)
    return {name: SD((*lead, *shape), jnp.dtype(dtype)) for name, shape, dtype in spaces.obs}


def action_spec(spaces, lead: tuple[int, ...] = ()) -> SD:
    """int32 [] class index (discrete) or f32 [A] in [-1, 1] (continuous)."""
    if spaces.act_discrete:
        return SD(lead, jnp.int32)
    return SD((*lead, spaces.act_dim), jnp.float32)


def env_row_spec(spaces, lead: tuple[int, ...] = ()) -> dict:
    """One env row as the collector emits it."""
    out = {"obs": obs_spec(spaces, lead), "reward": SD(lead, jnp.float32)}
    out.update({k: SD(lead, jnp.bool_) for k in FLAGS})
    return out


def replay_row_spec(spaces, deter: int, stoch: int, lead: tuple[int, ...] = ()) -> dict:
    """One replay row: the env row, the action taken at it and the policy's posterior."""
    return dict(env_row_spec(spaces, lead), action=action_spec(spaces, lead),
                deter=SD((*lead, deter), jnp.float32), stoch=SD((*lead, stoch), jnp.int32))


def batch_spec(spaces, deter: int, stoch: int, batch_size: int, length: int) -> dict:
    """A training batch [B, L, ...] as the replay samples it."""
    return replay_row_spec(spaces, deter, stoch, (batch_size, length))


def zeros(spec):
    """Arrays of zeros with the structure of a spec tree."""
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), spec)


def conform(tree, spec):
    """`tree` cast to the dtypes of `spec` (same structure); shapes are checked."""
    def one(x, s):
        x = jnp.asarray(x)
        if x.shape != s.shape:
            raise ValueError(f"row entry of shape {x.shape}, the schema says {s.shape}")
        return x.astype(s.dtype)
    return jax.tree.map(one, tree, spec)
