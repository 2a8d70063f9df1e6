"""A trained policy as a product: load it from a run or from an exported file, and act.

    policy = dreamerjax.load_policy("runs/cartpole", seed=0)   # or "cartpole.npz"
    state = policy.init(batch_size=8)
    action, state = policy.act({"vector": obs, "is_first": is_first}, state)

`act` is the agent's acting step (agent.policy: encoder, RSSM posterior step, actor), jitted,
batch-first: obs {key: [B, *shape]} (a bare array for a one-key observation), is_first [B]
(optional; False), key (optional; else drawn from the state's key), mode "sample" or "mode".
Its actions are the env's, as training's env wrappers send them (EnvActions): a continuous
action clipped to [-1, 1] and rescaled to the env's bounds, a discrete one the env's index;
`raw=True` gives the agent's own action instead.

An exported file (`dreamerjax export RUN_DIR --seed S --out FILE.npz`) is a plain .npz: one
array per parameter (`params/<module>/.../<name>`, one seed), and JSON strings with the
dotted config, the agent's spaces, the env's action bounds (EnvActions) and where it came
from. No optimiser state, no replay, no
pickle: it is read with numpy's allow_pickle=False, so loading never runs code from the
file, and a file whose arrays do not fit its own config is refused with the reason.
Loading from a run directory reads only the agent's parameters from the latest checkpoint
(an orbax partial restore: the replay stays on disk).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.config import dotted as config_dotted
from dreamerjax.config import keys as configs
from dreamerjax.config import resolve as config_resolve
from dreamerjax.config.defaults import Config
from dreamerjax.run import streams

FORMAT = "dreamerjax-policy/2"  # /1: no env_actions (read from the env of its config)
READS = (FORMAT, "dreamerjax-policy/1")
MODES = ("sample", "mode")


class PolicyError(ValueError):
    """A policy source (run directory or file) that cannot be loaded, with the reason."""


@dataclasses.dataclass(frozen=True)
class EnvActions:
    """How the env receives the agent's action, as training sends it.

    discrete: the agent's index plus `start` (Gymnasium's Discrete start). Continuous
    ([B, D] in the agent's [-1, 1]): clipped and rescaled to [low, high] per dim by the
    function training's envs use, reshaped to the env's action `shape`: a compiled env's
    in the program in float32 (envs.box_action, as to_env_action), a host env's on the
    host in the dtype of its bounds (host normalized_action, as the suite adapters' step;
    non-finite bounds pass the action through)."""

    discrete: bool
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    host: bool = False
    start: int = 0

    @classmethod
    def of_spec(cls, spec, host: bool) -> EnvActions:
        """The mapping of a run's env spec (envs.EnvSpec, or a host suite's HostSpec)."""
        if spec.discrete:
            return cls(True, host=host, start=int(getattr(spec, "action_start", 0)))
        return cls(False, tuple(map(float, spec.action_low)),
                   tuple(map(float, spec.action_high)),
                   tuple(map(int, spec.env_action_shape)),
                   str(getattr(spec, "action_bounds_dtype", "float32")), host)

    def to_json(self) -> dict:
        return {"discrete": self.discrete, "low": list(self.low), "high": list(self.high),
                "shape": list(self.shape), "dtype": self.dtype, "host": self.host,
                "start": self.start}

    @classmethod
    def from_json(cls, d: Any, path: Path) -> EnvActions:
        try:
            return cls(bool(d["discrete"]), tuple(float(x) for x in d["low"]),
                       tuple(float(x) for x in d["high"]), tuple(int(x) for x in d["shape"]),
                       str(np.dtype(d["dtype"])), bool(d["host"]), int(d["start"]))
        except (KeyError, TypeError, ValueError) as e:
            raise PolicyError(f"{path}: bad env_actions entry: {e!r}") from None

    def in_program(self, raw: jax.Array) -> jax.Array:
        """The env's actions of raw [B] | [B, D], computed inside the acting program where
        the env's own step computes them there (compiled envs); else raw as it is."""
        from dreamerjax import envs as envs_lib

        if self.discrete:
            return raw + jnp.int32(self.start) if self.start else raw
        if self.host:
            return raw
        return envs_lib.box_action(raw, self.low, self.high).reshape(
            raw.shape[0], *self.shape)

    def on_host(self, action: jax.Array) -> Any:
        """in_program's result -> the env's actions: a host env's continuous actions
        mapped here, as its adapter's step maps them (float64 bounds stay float64)."""
        if self.discrete or not self.host:
            return action
        from dreamerjax.envs.host import base as host_lib

        dtype = np.dtype(self.dtype)
        a = host_lib.normalized_action(np.asarray(action), np.asarray(self.low, dtype),
                                       np.asarray(self.high, dtype))
        return a.reshape(a.shape[0], *self.shape).astype(dtype)


# ---------------------------------------------------------------------------------------
# The policy


class Policy:
    """One seed's trained actor and world model (the parts acting needs run jitted)."""

    def __init__(self, config: Config, spaces, params: Mapping, seed: int = 0,
                 source: str = "", env_actions: EnvActions | None = None):
        """env_actions: how the run's env takes actions; None reads it from the env
        (run/setup.make_setup: a host env is built once to read its spaces)."""
        self.config, self.spaces, self.seed, self.source = config, spaces, int(seed), source
        self.params = jax.tree.map(jnp.asarray, dict(params))
        if env_actions is None:
            env_actions = env_actions_of(config)
        self.env_actions = env_actions
        self._act = jax.jit(functools.partial(_act, config.agent, spaces, env_actions),
                            static_argnames=("mode",))

    def __repr__(self) -> str:
        return (f"Policy(env={self.config.run.env!r}, size={self.config.size!r}, "
                f"seed={self.seed}, obs={self.spaces.obs_keys}, source={self.source!r})")

    def init(self, batch_size: int) -> dict:
        """The state of batch_size fresh episodes: {carry: the agent's policy carry,
        key: the sampling key (the seed's act stream, run/streams.py)}."""
        from dreamerjax.algo import agent as agent_lib

        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        carry = agent_lib.policy_initial(self.config.agent, self.spaces, int(batch_size))
        return {"carry": carry, "key": jnp.asarray(streams.key(self.seed, "act"))}

    def act(self, obs: Any, state: Mapping, key: jax.Array | None = None,
            mode: str = "sample", raw: bool = False) -> tuple[Any, dict]:
        """One step for every episode of the batch: (action, new state). The action is
        the env's (EnvActions): [B] int32, the env's index, or [B, *shape] continuous,
        clipped and rescaled to the env's bounds as training sends it; raw=True gives
        the agent's own: a discrete action's index [B] int32 (the reference's policy's,
        agent.py:161-163 @29eb964; without the env's `start`), a continuous action
        [B, A] float32 in [-1, 1], unclipped. Without `key`, one is split off the
        state's key."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        obs, is_first = self._inputs(obs, state)
        state = dict(state)
        if key is None:
            state["key"], key = jax.random.split(state["key"])
        agent_action, action, carry = self._act(self.params, state["carry"], obs, is_first,
                                                key, mode=mode == "mode")
        state["carry"] = carry
        if raw:
            return agent_action, state
        return self.env_actions.on_host(action), state

    def _inputs(self, obs: Any, state: Mapping) -> tuple[dict, jax.Array]:
        batch = int(state["carry"]["deter"].shape[0])
        if not isinstance(obs, Mapping):
            if len(self.spaces.obs_keys) != 1:
                raise ValueError(f"obs must be a dict with keys {self.spaces.obs_keys}")
            obs = {self.spaces.obs_keys[0]: obs}
        out = {}
        for name, (shape, dtype) in self.spaces.obs_dict().items():
            if name not in obs:
                raise ValueError(f"obs lacks key {name!r} (the policy reads "
                                 f"{self.spaces.obs_keys})")
            x = jnp.asarray(obs[name])
            if x.shape != (batch, *shape):
                raise ValueError(f"obs[{name!r}] has shape {x.shape}, the policy needs "
                                 f"{(batch, *shape)} (batch {batch} from the state)")
            out[name] = x.astype(dtype)
        first = obs.get("is_first")
        is_first = (jnp.zeros((batch,), bool) if first is None
                    else jnp.asarray(first).astype(bool).reshape(batch))
        return out, is_first

    # ----------------------------------------------------------------- file

    def save(self, path: str | os.PathLike) -> Path:
        """Write the policy file (.npz): params, config, spaces; nothing else."""
        path = Path(path)
        if path.suffix != ".npz":
            raise PolicyError(f"{path}: a policy file ends in .npz")
        arrays = {f"params/{k}": np.asarray(v) for k, v in _flat_params(self.params).items()}
        meta = {
            "format": FORMAT,
            "config": {k: list(v) if isinstance(v, tuple) else v
                       for k, v in config_dotted.to_dotted(self.config).items()},
            "spaces": _spaces_to_json(self.spaces),
            "env_actions": self.env_actions.to_json(),
            "seed": self.seed,
            "source": self.source,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, __meta__=np.array(json.dumps(meta, sort_keys=True)), **arrays)
        os.replace(tmp, path)
        return path


def _act(cfg, spaces, env_actions: EnvActions, params, carry, obs, is_first, key,
         mode: bool):
    """The acting step of training and evaluation (acting.act) on the user's rows, which
    are never is_last (no env step follows them here, so no action is zeroed)."""
    from dreamerjax.run import acting

    row = {"obs": obs, "is_first": is_first, "is_last": jnp.zeros_like(is_first)}
    stored, carry = acting.act(cfg, spaces, params, carry, row, key, mode)
    return stored["action"], env_actions.in_program(stored["action"]), carry


def env_actions_of(config: Config, setup=None) -> EnvActions:
    """The EnvActions of a run's env (from its setup, else made from the config)."""
    from dreamerjax.run import setup as setup_lib

    setup = setup_lib.make_setup(config) if setup is None else setup
    return EnvActions.of_spec(setup.spec, setup.host)


# ---------------------------------------------------------------------------------------
# Loading


def load_policy(source: str | os.PathLike, seed: int | None = None,
                checkpoint: int | str = "latest") -> Policy:
    """A Policy from a run directory or one of its checkpoints (RUN/checkpoints/K), seed
    `seed` (None: 0), or from a file written by `export`, which holds one seed: None takes
    it, another is refused. checkpoint: of a run directory, a kept checkpoint's number or
    "latest" (the newest that verifies), as `evaluate` and `dreamerjax eval` take it."""
    from dreamerjax.run import checkpoint as ckpt

    path = Path(source)
    if checkpoint != "latest" and not (isinstance(checkpoint, int) or str(
            checkpoint).isdigit()):
        raise PolicyError(f"checkpoint {checkpoint!r}: load_policy takes one checkpoint, "
                          "its number or 'latest'")
    inside = ckpt.split_checkpoint_path(path)
    if inside is not None:  # RUN/checkpoints/K
        if checkpoint not in ("latest", inside[1], str(inside[1])):
            raise PolicyError(f"{path} is checkpoint {inside[1]}, not {checkpoint}")
        path, checkpoint = inside
    if path.is_dir():
        return _from_run(path, 0 if seed is None else int(seed), checkpoint)
    if checkpoint != "latest":
        raise PolicyError(f"checkpoint {checkpoint}: {path} is not a run directory (a "
                          "policy file holds one checkpoint's parameters)")
    if path.is_file():
        policy = _from_file(path)
        if seed is not None and int(seed) != policy.seed:
            raise PolicyError(f"{path}: holds seed {policy.seed} alone, not seed {seed} "
                              f"(export seed {seed} of the run to another file)")
        return policy
    raise PolicyError(f"{path}: no such run directory or policy file")


def export(run_dir: str | os.PathLike, seed: int, out: str | os.PathLike) -> Path:
    """Write seed `seed`'s policy of a run's latest checkpoint to `out` (.npz)."""
    if not Path(run_dir).is_dir():
        raise PolicyError(f"{run_dir}: no such run directory")
    return _from_run(Path(run_dir), int(seed)).save(out)


def _from_run(run_dir: Path, seed: int, checkpoint: int | str = "latest") -> Policy:
    from dreamerjax.run import checkpoint as ckpt
    from dreamerjax.run import records
    from dreamerjax.run import setup as setup_lib

    if not (run_dir / records.CONFIG_FILE).is_file():
        raise PolicyError(f"{run_dir}: no config.json (not a dreamerjax run directory)")
    try:  # imports the modules that registered the run's env, as every reader of a run
        config, seeds = records.read_run_config(run_dir)
    except ValueError as e:
        raise PolicyError(str(e)) from e
    seeds = list(seeds)
    if seed not in seeds:
        raise PolicyError(f"{run_dir}: seed {seed} was not trained (seeds {seeds})")
    if not ckpt.indices(run_dir):
        raise PolicyError(f"{run_dir}: no checkpoint to load a policy from")
    try:  # a damaged newest one: the previous, warned
        index = ckpt.chosen(run_dir, checkpoint)[0]
    except ValueError as e:  # NoGoodCheckpoint, one not kept or damaged
        raise PolicyError(str(e)) from e
    try:  # the plan's first part: the run's config validated once, its setup built once
        setup = setup_lib.checked_setup(config, seeds)
    except configs.ConfigError as e:
        raise PolicyError(f"{run_dir}: {e}") from e
    spaces = setup.spaces
    stacked = stacked_params(run_dir, index, config, spaces, len(seeds))
    params = jax.tree.map(lambda x: x[seeds.index(seed)], stacked)
    return Policy(config, spaces, params, seed, source=f"{run_dir} checkpoint {index}",
                  env_actions=env_actions_of(config, setup))


def stacked_params(run_dir: str | os.PathLike, index: int, config: Config, spaces,
                   num_seeds: int) -> dict:
    """Every seed's agent params [seeds, ...] of checkpoint `index`, read alone (the
    evaluation path of `dreamerjax eval` and load_policy)."""
    return _restore_params(Path(run_dir), int(index), _param_shapes(config, spaces),
                           num_seeds)


def _restore_params(run_dir: Path, index: int, want: dict, num_seeds: int) -> dict:
    """The agent's params [seeds, ...] of checkpoint `index`, read alone: the leaves under
    `.agent.params` of a packed state (checkpoint.read_leaves), else orbax's partial
    restore of the agent's params in the `state` item, or of an `agent` item."""
    import orbax.checkpoint as ocp

    from dreamerjax.run import checkpoint as ckpt

    base = (run_dir / ckpt.CHECKPOINT_DIR / str(index)).absolute()
    local = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    flat, treedef = jax.tree_util.tree_flatten_with_path(want)
    names = [".agent.params" + jax.tree_util.keystr(path) for path, _ in flat]
    try:
        leaves = ckpt.read_leaves(run_dir, index, names)
    except KeyError as e:
        raise PolicyError(f"{base}: the agent's parameters do not fit the run's config "
                          f"(no {e.args[0]} in the checkpoint)") from None
    if leaves is not None:
        for name, (_, s) in zip(names, flat, strict=True):
            if leaves[name].shape != (num_seeds, *s.shape):
                raise PolicyError(f"{base}: the agent's parameters do not fit the run's "
                                  f"config ({name}: {list(leaves[name].shape)} saved, "
                                  f"{[num_seeds, *s.shape]} wanted)")
        return jax.tree_util.tree_unflatten(
            treedef, jax.device_put([leaves[name] for name in names], local))
    target = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct((num_seeds, *s.shape), s.dtype), want)
    for item, nest in (("agent", ("params",)), ("state", ("agent", "params"))):
        path = base / item
        if not path.is_dir():
            continue
        item_target: Any = target
        for part in reversed(nest):
            item_target = {part: item_target}
        args = ocp.args.PyTreeRestore(
            item=item_target, partial_restore=True,
            restore_args=jax.tree.map(lambda _: ocp.ArrayRestoreArgs(sharding=local),
                                      item_target))
        try:
            out = ocp.PyTreeCheckpointer().restore(path, args=args)
        except (ValueError, KeyError, TypeError) as e:
            raise PolicyError(f"{base}: the agent's parameters do not fit the run's config "
                              f"({str(e).splitlines()[0]})") from None
        for part in nest:
            out = out[part]
        return out
    raise PolicyError(f"{base}: holds no agent state")


def _from_file(path: Path) -> Policy:
    if not zipfile.is_zipfile(path):
        raise PolicyError(f"not a dreamerjax policy file: {path} (not a .npz zip archive)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise PolicyError(f"not a dreamerjax policy file: {path} ({e})") from None
    except ValueError as e:  # an object array: would need pickle
        raise PolicyError(f"{path}: refused: {e}") from None
    if "__meta__" not in arrays:
        raise PolicyError(f"not a dreamerjax policy file: {path} (no __meta__ entry)")
    try:
        meta = json.loads(str(arrays.pop("__meta__")))
    except json.JSONDecodeError as e:
        raise PolicyError(f"{path}: __meta__ is not JSON: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") not in READS:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise PolicyError(f"{path}: format {got!r}, this version reads {' or '.join(READS)}")
    for field in ("config", "spaces", "seed") + (("env_actions",) if meta["format"] == FORMAT
                                                 else ()):
        if field not in meta:
            raise PolicyError(f"{path}: __meta__ lacks {field!r}")
    try:
        config = config_resolve.from_mapping(meta["config"], f"{path} config")
    except configs.ConfigError as e:
        raise PolicyError(f"{path}: {e}") from None
    spaces = _spaces_from_json(meta["spaces"], path)
    want = _flat_params(_param_shapes(config, spaces))
    got = {k.removeprefix("params/"): v for k, v in arrays.items()}
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    if missing or extra:
        raise PolicyError(f"{path}: parameters do not fit its config: missing {missing[:3]}"
                          f"{' ...' if len(missing) > 3 else ''}, unexpected {extra[:3]}"
                          f"{' ...' if len(extra) > 3 else ''}")
    for name, spec in want.items():
        arr = got[name]
        if arr.shape != spec.shape or arr.dtype != spec.dtype:
            raise PolicyError(f"{path}: params/{name} is {arr.dtype}{list(arr.shape)}, its "
                              f"config needs {spec.dtype}{list(spec.shape)}")
        if not np.all(np.isfinite(arr)):
            raise PolicyError(f"{path}: params/{name} holds non-finite values")
    return Policy(config, spaces, _unflatten(got), int(meta["seed"]), source=str(path),
                  env_actions=(EnvActions.from_json(meta["env_actions"], path)
                               if "env_actions" in meta else None))


# ---------------------------------------------------------------------------------------
# Helpers


def _param_shapes(config: Config, spaces) -> dict:
    from dreamerjax.algo import agent as agent_lib

    return jax.eval_shape(lambda k: agent_lib.init_params(k, config.agent, spaces),
                          jax.random.PRNGKey(0))


def _flat_params(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flat_params(v, name + "/"))
        else:
            out[name] = v
    return out


def _unflatten(flat: Mapping[str, Any]) -> dict:
    out: dict = {}
    for name, v in flat.items():
        node = out
        *parents, last = name.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = v
    return out


def _spaces_to_json(spaces) -> dict:
    return {"obs": [[n, list(s), t] for n, s, t in spaces.obs],
            "act_discrete": bool(spaces.act_discrete), "act_dim": int(spaces.act_dim),
            "enc_spaces": spaces.enc_spaces, "dec_spaces": spaces.dec_spaces}


def _spaces_from_json(d: Any, path: Path):
    from dreamerjax.algo import spaces as spaces_lib

    try:
        obs = tuple((str(n), tuple(int(x) for x in s), str(t)) for n, s, t in d["obs"])
        return spaces_lib.Spaces(obs, bool(d["act_discrete"]), int(d["act_dim"]),
                                 str(d["enc_spaces"]), str(d["dec_spaces"]))
    except (KeyError, TypeError, ValueError) as e:
        raise PolicyError(f"{path}: bad spaces entry: {e}") from None
