"""What the agent sees and does: the named observation keys and the action space, their
one check, and the stored observations turned into network inputs.

Follows agent.py @29eb964 (the obs / act spaces, :36-43; Agent.preprocess, :462-473).
"""

from __future__ import annotations

import dataclasses
import re

import jax.numpy as jnp
import numpy as np

f32 = jnp.float32

# Data keys that are not observations the encoder or decoder may see (agent.py:36-43).
RESERVED_KEYS = ("action", "reward", "is_first", "is_last", "is_terminal", "cont",
                 "deter", "stoch", "stepid", "reset")
OBS_DTYPES = ("float32", "uint8")


@dataclasses.dataclass(frozen=True)
class Spaces:
    """What the agent sees and does.

    obs: named observation entries `(name, shape, dtype_str)` in the environment's key
    order: rank-1 float32 vectors (D,) and rank-3 images (H, W, C), uint8 (divided by 255
    in `preprocess`, agent.py:462-473) or float32 (used as they are). Actions are either
    `act_discrete` with `act_dim` classes (int32 index) or continuous in [-1, 1]^act_dim.
    enc_spaces / dec_spaces: the reference's `enc.spaces` / `dec.spaces` regexes
    (configs.yaml:115,119; agent.py:36-43): the keys that `re.match` them are encoded /
    decoded. Hashable, so it can be a static argument of jit.
    """

    obs: tuple[tuple[str, tuple[int, ...], str], ...]
    act_discrete: bool
    act_dim: int
    enc_spaces: str = ".*"
    dec_spaces: str = ".*"

    def __post_init__(self):
        obs = tuple((str(n), tuple(int(d) for d in s), str(t)) for n, s, t in self.obs)
        object.__setattr__(self, "obs", obs)
        if not obs:
            raise ValueError("Spaces.obs is empty: the agent needs at least one observation key")
        names = [n for n, _, _ in obs]
        for name, shape, dtype in obs:
            check_obs_entry(name, shape, dtype)
            if names.count(name) > 1:
                raise ValueError(f"observation key {name!r} appears twice in Spaces.obs")
        if self.act_dim < 1 or (self.act_discrete and self.act_dim < 2):
            raise ValueError(
                f"Unsupported action space (discrete={self.act_discrete}, dim={self.act_dim}): "
                "need a discrete space with >= 2 actions or a continuous box with >= 1 dims.")
        for flag in ("enc_spaces", "dec_spaces"):
            pattern = getattr(self, flag)
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{flag} {pattern!r} is not a regular expression: {exc}") from None
        if not self.enc_keys:
            raise ValueError(f"enc_spaces {self.enc_spaces!r} matches none of the observation "
                             f"keys {names}")
        _same_resolution(self.enc_image_keys, self.obs_dict(), "enc_spaces")
        _same_resolution(self.dec_image_keys, self.obs_dict(), "dec_spaces")

    @classmethod
    def vector(cls, dim: int, act_discrete: bool, act_dim: int, name: str = "vector"):
        """One float32 vector observation, e.g. CartPole: Spaces.vector(4, True, 2)."""
        return cls(((name, (int(dim),), "float32"),), act_discrete, act_dim)

    def obs_dict(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """{name: (shape, numpy dtype)} in key order."""
        return {n: (s, np.dtype(t)) for n, s, t in self.obs}

    @property
    def obs_keys(self) -> tuple[str, ...]:
        return tuple(n for n, _, _ in self.obs)

    def _match(self, pattern: str, rank: int | None = None) -> tuple[str, ...]:
        return tuple(n for n, s, _ in self.obs
                     if re.match(pattern, n) and (rank is None or len(s) == rank))

    @property
    def enc_keys(self) -> tuple[str, ...]:
        return self._match(self.enc_spaces)

    @property
    def enc_vector_keys(self) -> tuple[str, ...]:
        return self._match(self.enc_spaces, 1)

    @property
    def enc_image_keys(self) -> tuple[str, ...]:
        return self._match(self.enc_spaces, 3)

    @property
    def dec_vector_keys(self) -> tuple[str, ...]:
        return self._match(self.dec_spaces, 1)

    @property
    def dec_image_keys(self) -> tuple[str, ...]:
        return self._match(self.dec_spaces, 3)

    @property
    def dec_keys(self) -> tuple[str, ...]:
        """Decoder outputs in the reference's order: vectors, then images (nets.py:311-369);
        each names its loss term."""
        return self.dec_vector_keys + self.dec_image_keys


def check_obs_entry(name: str, shape: tuple[int, ...], dtype: str) -> None:
    """One observation key the rows can carry and the agent can see (ValueError naming it):
    the one check of observation shapes and dtypes (envs/core.EnvSpec calls it too)."""
    if not name or "/" in name:
        raise ValueError(f"observation key {name!r}: a name without '/' is required")
    if name in RESERVED_KEYS:
        raise ValueError(f"observation key {name!r} is reserved for the replay row")
    if len(shape) not in (1, 3) or any(d < 1 for d in shape):
        raise ValueError(
            f"observation key {name!r} has shape {shape}: dreamerjax handles vectors (D,) "
            "with the MLP encoder and images (H, W, C) with the CNN encoder")
    if dtype not in OBS_DTYPES:
        raise ValueError(f"observation key {name!r} has dtype {dtype}: use one of "
                         f"{', '.join(OBS_DTYPES)}")
    if len(shape) == 1 and dtype != "float32":
        raise ValueError(f"observation key {name!r}: vectors must be float32, got {dtype}")


def _same_resolution(keys, obs: dict, flag: str) -> None:
    """Images enter the CNN concatenated along channels (nets.py Input, featdims 3)."""
    res = {k: obs[k][0][:2] for k in keys}
    if len(set(res.values())) > 1:
        raise ValueError(f"{flag}: image keys {res} must share one height and width")


def preprocess(spaces: Spaces, obs: dict, dtype=f32) -> dict:
    """Stored observations -> network inputs: uint8 images cast to `dtype` (the compute
    dtype) and divided by 255 in it (Agent.preprocess, agent.py:469-470), everything else
    cast to float32. {name: [..., *shape]}."""
    out = {}
    for name, (_, stored) in spaces.obs_dict().items():
        x = obs[name]
        out[name] = x.astype(dtype) / 255.0 if stored == np.uint8 else x.astype(f32)
    return out
