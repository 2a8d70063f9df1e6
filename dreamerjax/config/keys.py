"""The configuration as the reference spells it: dotted keys, named configs, overrides.

A run's configuration is resolved in layers, each applied on the result of the last:

    defaults < --config FILE < --configs NAME ... (left to right) < --set KEY=VALUE ...
             < explicit flags (--env, --steps, ...)

The reference applies its named configs and then its flags (dreamerv3/main.py:30-34
@29eb964); the file comes first here so that a run's own config can be the base of a new
one, and explicit flags last because they name one thing each. `--size S` and `--tiny` are
named configs appended after `--configs` (so `--set` still overrides their widths).

Keys are the reference's (dreamerv3/configs.yaml @29eb964). `KEYS` maps each key that has a
meaning here to a field of the frozen `Config` (one table); `FIXED` holds keys whose only
implemented value is accepted and any other refused; `REFUSED` holds keys with no meaning
here, each with the reason. Any other key is refused with the closest names. A key with a
character outside [A-Za-z0-9_.-] is a regex over the known keys, as in the reference
(embodied/core/config.py:11,113-117): named configs and files match it from the start of a
key (`re.match`, as Config.update), `--set` over the whole key (`re.fullmatch`, as
embodied/core/flags.py:78-83).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamerjax.config import versions
from dreamerjax.config.defaults import (
    COMPUTE_DTYPES,
    DEFAULT_SIZE,
    HEAD_REF,
    LOGGER_OUTPUTS,
    REFERENCES,
    REFUSED_COMPUTE_DTYPES,
    SEED_LOOPS,
    SIZES,
    TINY,
    TWOHOT_MEANS,
    AgentConfig,
    Config,
    RunConfig,
    agent_config,
    check_agent_options,
    from_dict,
    mesh_shape,
    replay_rows_per_env,
    tiny_agent_config,
)


class ConfigError(ValueError):
    """A configuration key or value that cannot run, found before anything compiles."""


class NotResumable(ConfigError):
    """A key that cannot change when a run is resumed (with_resumed_sets)."""


IS_PATTERN = re.compile(r".*[^A-Za-z0-9_.-].*")  # embodied/core/config.py:11


# ---------------------------------------------------------------------------------------
# The key table: dotted key -> Config field path (the type is the field's)


def _group(prefix: str, path: str, names: Iterable[str]) -> dict[str, str]:
    return {f"{prefix}.{n}": f"{path}.{n}" for n in names}


# Fields of the reference's suite sections that are ours (in OUR_KEYS, not REFERENCE_KEYS).
_OWN_SUITE_FIELDS = {"atari": ("sticky_literal",), "atari100k": ("sticky_literal",)}


def _suite(name: str, own: bool = False) -> dict[str, str]:
    """env.<suite>.<field> for the fields of that suite's dataclass: the reference's, or
    with own=True those of _OWN_SUITE_FIELDS."""
    cls = typing.get_type_hints(type(Config().env))[name]
    mine = _OWN_SUITE_FIELDS.get(name, ())
    names = (f.name for f in dataclasses.fields(cls) if (f.name in mine) == own)
    return _group(f"env.{name}", f"env.{name}", names)


_HEAD = ("layers", "units", "outscale")

# Reference keys (configs.yaml @29eb964, line of the key) -> field path.
REFERENCE_KEYS: dict[str, str] = {
    "task": "run.env",  # :5; our ids (gymnax names or suite_task)
    "run.steps": "run.steps",  # :42
    "run.num_envs": "run.num_envs",  # :44
    "run.eval_eps": "run.eval_episodes",  # :50
    "run.train_ratio": "run.train_ratio",  # :52
    "run.train_fill": "run.train_fill",  # :53
    "replay.size": "run.replay_size",  # :12
    # :14-17; the selector mixture (data/replay.py Selector).
    **{f"replay.fracs.{k}": f"run.replay_{k}" for k in ("uniform", "priority", "recency")},
    **{f"replay.prio.{k}": f"run.replay_prio_{k}"
       for k in ("exponent", "maxfrac", "initial", "zero_on_sample")},
    "replay.recexp": "run.replay_recexp",
    "replay.priosignal": "run.replay_priosignal",
    "wrapper.length": "run.episode_limit",  # :77
    "run.driver_parallel": "run.driver_parallel",  # :73; host envs only, ours False
    **_suite("atari"), **_suite("atari100k"), **_suite("crafter"), **_suite("dmc"),  # :79-84
    "batch_size": "run.batch_size",  # :91
    "batch_length": "run.batch_length",  # :92; the reference's includes replay_context
    "replay_context": "run.replay_context",  # :96
    **_group("loss_scales", "agent.loss_scales",  # :98
             ("dec_cnn", "dec_mlp", "reward", "cont", "dyn", "rep", "actor", "critic",
              "replay_critic")),
    **_group("opt", "agent.opt", ("lr", "eps", "warmup", "agc", "beta1", "beta2", "pmin",
                                  "wd", "globclip", "anneal", "schedule")),
    "separate_lrs": "agent.separate_lrs",  # :100
    **_group("lrs", "agent.lrs", ("dec", "enc", "dyn", "rew", "con", "actor", "critic")),
    "reset_context": "agent.reset_context",  # :103
    **_group("valnorm", "agent.valnorm", ("impl", "rate", "limit")),  # :142
    **_group("advnorm", "agent.advnorm", ("impl", "rate", "limit")),  # :143
    "run.expl_until": "run.expl_until",  # :46; the policy acts alike in both modes
    "replay_critic_loss": "agent.replay_critic_loss",  # :104
    **_group("dyn.rssm", "agent.rssm",  # :113
             ("deter", "hidden", "stoch", "classes", "unimix", "outscale", "imglayers",
              "obslayers", "dynlayers", "absolute", "blocks")),
    "enc.spaces": "agent.enc_spaces",  # :115
    **_group("enc.simple", "agent.enc",  # :117
             ("depth", "mults", "layers", "units", "symlog", "outer", "kernel", "minres")),
    "dec.spaces": "agent.dec_spaces",  # :119
    **_group("dec.simple", "agent.dec",  # :121
             ("depth", "mults", "layers", "units", "outscale", "outer", "kernel", "minres",
              "block_space", "hidden_stoch")),
    **_group("rewhead", "agent.rewhead", (*_HEAD, "bins")),  # :122
    **_group("conhead", "agent.conhead", _HEAD),  # :123
    "contdisc": "agent.contdisc",  # :124
    "rssm_loss.free": "agent.free_nats",  # :125
    **_group("actor", "agent.actor", _HEAD),  # :128
    "actor.minstd": "agent.actor_minstd",
    "actor.maxstd": "agent.actor_maxstd",
    "actor.unimix": "agent.actor_unimix",
    **_group("critic", "agent.critic", (*_HEAD, "bins")),  # :129
    "imag_length": "agent.imag_length",  # :134
    "horizon": "agent.horizon",  # :136
    "return_lambda": "agent.return_lambda",  # :137
    "return_lambda_replay": "agent.return_lambda_replay",  # :138
    "slow_critic_update": "agent.slow_critic_update",  # :139
    "slow_critic_fraction": "agent.slow_critic_fraction",  # :140
    **_group("retnorm", "agent.retnorm", ("rate", "limit", "perclo", "perchi")),  # :141
    "actent": "agent.actent",  # :144
    "slowreg": "agent.slowreg",  # :145
    "jax.compute_dtype": "agent.compute_dtype",  # :24; ours defaults to float32
    "jax.train_devices": "run.train_devices",  # :31
    # The reference's HEAD (configs.yaml:23-24 at e3f0224); 29eb964 has only a top-level
    # `filter` and a fixed set of outputs (dreamerv3/main.py:147-159).
    "logger.outputs": "logger.outputs",
    "logger.filter": "logger.filter",
}

# Our own settings, which the reference does not have (names chosen not to collide with a
# reference key of another meaning: the reference's run.eval_every is in seconds).
OUR_KEYS: dict[str, str] = {
    "run.eval_every_rows": "run.eval_every",
    "run.checkpoint_every": "run.checkpoint_every",
    "run.report_every_logs": "run.report_every",
    "run.replay_capacity": "run.replay_capacity",
    "run.seed_loop": "run.seed_loop",
    # HEAD's mesh key (embodied/jax/agent.py:27 @e3f0224), accepted at both versions.
    "jax.train_mesh": "run.train_mesh",
    "dec.simple.vec_outscale": "agent.dec.vec_outscale",
    "twohot_mean": "agent.twohot_mean",
    "sample_mode": "agent.sample_mode",
    # The reference version a run follows (29eb964 or e3f0224, config.versions).
    "reference": "agent.reference",
    # The compiled suites' options (what envs/compiled/craftax.py, playground.py, brax.py take).
    **_suite("craftax"), **_suite("playground"), **_suite("brax"),
    # Whether env.atari*.sticky takes effect (the reference's does not; envs/host/atari.py).
    **_suite("atari", own=True), **_suite("atari100k", own=True),
    # Where the W&B and MLflow outputs write (run/outputs.py).
    "logger.wandb.project": "logger.wandb_project",
    "logger.wandb.entity": "logger.wandb_entity",
    "logger.mlflow.uri": "logger.mlflow_uri",
    "logger.mlflow.experiment": "logger.mlflow_experiment",
}

# Float keys whose +inf is a value: a new item's priority, drawn before any finite one
# (configs.yaml:15 @29eb964, the default).
MAY_BE_INFINITE = frozenset({"replay.prio.initial"})

# String keys whose empty value means "left to the package" (LoggerConfig).
MAY_BE_EMPTY = frozenset({"logger.wandb.project", "logger.wandb.entity", "logger.mlflow.uri"})

KEYS: dict[str, str] = {**REFERENCE_KEYS, **OUR_KEYS}

# Config fields without a key: the label `size` (derived), and `bins` of the heads whose
# output is not two-hot.
UNKEYED_FIELDS = frozenset({"size", "agent.conhead.bins", "agent.actor.bins"})

_NOT_CONFIGURABLE = "only this value is implemented"

# Keys whose one implemented value is the reference's default: accepted at that value.
FIXED: dict[str, tuple[Any, str]] = {
    **{f"{p}.{k}": (v, _NOT_CONFIGURABLE)
       for p in ("dyn.rssm", "enc.simple", "dec.simple", "rewhead", "conhead", "actor",
                 "critic")
       for k, v in (("act", "silu"), ("norm", "rms"), ("winit", "normal"))},
    **{f"{p}.{k}": (False, _NOT_CONFIGURABLE)
       for p in ("dyn.rssm", "dec.simple", "rewhead", "conhead", "actor", "critic")
       for k in ("block_fans", "block_norm")},
    **{f"{p}.inputs": (("deter", "stoch"), "heads read deter and stoch")
       for p in ("dec.simple", "rewhead", "conhead", "actor", "critic")},
    "dyn.typ": ("rssm", _NOT_CONFIGURABLE),
    "dyn.rssm.cell": ("blockgru", _NOT_CONFIGURABLE),
    "enc.typ": ("simple", _NOT_CONFIGURABLE),
    "dec.typ": ("simple", _NOT_CONFIGURABLE),
    "dec.simple.vecdist": ("symlog_mse", _NOT_CONFIGURABLE),
    "dec.simple.space_hidden": (0, _NOT_CONFIGURABLE),
    "rewhead.dist": ("symexp_twohot", _NOT_CONFIGURABLE),
    "critic.dist": ("symexp_twohot", _NOT_CONFIGURABLE),
    "conhead.dist": ("binary", _NOT_CONFIGURABLE),
    "actor_dist_disc": ("onehot", _NOT_CONFIGURABLE),
    "actor_dist_cont": ("normal", _NOT_CONFIGURABLE),
    "imag_start": ("all", "imagination starts from every replayed posterior"),
    "imag_repeat": (1, _NOT_CONFIGURABLE),
    "imag_unroll": (False, "imagination is a lax.scan"),
    "retnorm.impl": ("perc", _NOT_CONFIGURABLE),
    "slowtar": (False, _NOT_CONFIGURABLE),
    "opt.scaler": ("rms", _NOT_CONFIGURABLE),
    "opt.momentum": (True, _NOT_CONFIGURABLE),
    "opt.details": (False, "optimiser details are not reported"),
    "ac_grads": ("none", _NOT_CONFIGURABLE),
    "replay_critic_grad": (True, _NOT_CONFIGURABLE),
    "replay_critic_bootstrap": ("imag", _NOT_CONFIGURABLE),
    "reward_grad": (True, _NOT_CONFIGURABLE),
    "replay.online": (True, "the replay always serves its online queue first"),
    "replay_length": (0, "replayed sequences are batch_length rows"),
    "wrapper.reset": (True, "envs always reset after their last row"),
    "wrapper.discretize": (0, "action discretisation is not implemented"),
    "wrapper.checks": (True, "rows are always checked"),
    "report_openl_context": (8, "the open-loop report observes 8 rows (viz/report.py)"),
    "jax.param_dtype": ("float32", "parameters are float32"),
}

_LOGGER = "logging is dreamerjax's own (records.jsonl, TensorBoard)"
_DRIVER = "the reference's process layout; here one compiled program runs every env"
_SECONDS = ("seconds of wall clock in the reference; dreamerjax counts rows "
            "(run.eval_every_rows, run.checkpoint_every)")

# Keys (or key prefixes) with no meaning here -> why.
REFUSED: dict[str, str] = {
    "seed": "seeds are given as a list: --seeds 0 1 2 (trained side by side)",
    "method": _LOGGER,
    "logdir": "the run directory is --out",
    "eval_dir": "train_holdout is not implemented",
    "filter": "the terminal line's filter is logger.filter (the reference's HEAD name)",
    "tensorboard_videos": _LOGGER,
    "logger.timer": "timers are not reported",
    "logger.fps": "episode videos are written by `dreamerjax eval --video` at their own rate",
    "logger.user": "expa, the reference's internal logger, is not implemented",
    "replay.chunksize": "the replay lives on the device, not in saved chunks",
    "replay.save_wait": "the replay lives on the device, not in saved chunks",
    "jax.platform": "JAX picks its backend (set JAX_PLATFORMS)",
    "jax.jit": "training is always compiled",
    "jax.prealloc": "set XLA_PYTHON_CLIENT_PREALLOCATE",
    "jax.policy_devices": ("the policy acts on each seed's train devices, its envs split "
                           "across them (jax.train_devices)"),
    "jax.policy_mesh": "the policy acts on the train mesh's devices (jax.train_mesh)",
    **{f"jax.{k}": "a JAX runtime option of the reference's driver"
       for k in ("checks", "logical_cpus", "debug", "sync_every", "profiler",
                 "transfer_guard", "assert_num_devices", "fetch_policy_carry",
                 "nvidia_flags", "xla_dump")},
    "run.script": "the subcommand chooses (dreamerjax train, eval)",
    "run.duration": "no wall-clock limit; run.steps ends a run",
    "run.num_envs_eval": "evaluation runs run.eval_eps episodes in as many envs at once",
    "run.log_every": _SECONDS,
    "run.save_every": _SECONDS,
    "run.eval_every": _SECONDS,
    "run.report_every": ("seconds of wall clock in the reference (e3f0224); dreamerjax "
                         "counts log points (run.report_every_logs)"),
    "run.eval_initial": "evaluation runs at every log point, after its chunk",
    "run.eval_fill": "there is no evaluation replay",
    **{f"run.{k}": _LOGGER
       for k in ("log_zeros", "log_keys_video", "log_keys_sum", "log_keys_avg",
                 "log_keys_max", "log_video_fps", "log_video_streams",
                 "log_episode_timeout", "usage", "timer")},
    "run.from_checkpoint": "continue a run with --resume RUN_DIR",
    **{f"run.{k}": _DRIVER
       for k in ("actor_addr", "replay_addr", "logger_addr", "actor_batch",
                 "actor_threads", "env_replica", "ipv6",
                 "agent_process", "remote_replay")},
    **{f"env.{s}": f"the {s} suite is not implemented"
       for s in ("dmlab", "minecraft", "procgen", "loconav")},
    "env.crafter.logs": "crafter's own logdir logging is not used",
    "env.crafter.use_logdir": "crafter's own logdir logging is not used",
    "report": "the open-loop report is written every run.report_every_logs log points "
              "(0: never)",
    "report_gradnorms": "gradient norms are not reported",
    "batch_length_eval": "there is no evaluation replay",
    "replay_length_eval": "there is no evaluation replay",
    "random_agent": "not implemented",
    "run.protocol": ("`dreamerjax compare` reads any run: S2 from its episodes.jsonl, the "
                     "other fields from its records"),
}

# Keys that config files and exported policies of earlier runs hold but that set nothing
# now: reading such a file drops them (a --set of one is refused with REFUSED's reason).
RETIRED_KEYS = frozenset({"run.protocol"})


def _without_retired(flat: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in flat.items() if k not in RETIRED_KEYS}

# Config fields that may differ between a checkpoint and the run resuming it: none
# changes a shape or the algorithm. run.steps may only grow (steps_may_grow);
# logger.outputs: an output added starts at the resumed log point, one left out stops
# (run/outputs.py).
RESUMABLE_FIELDS = frozenset({"run.steps", "run.checkpoint_every", "run.driver_parallel",
                              "run.report_every", "logger.outputs"})


def steps_may_grow(saved: int, new: int) -> str | None:
    """Why `new` run.steps cannot resume a run of `saved` steps, or None."""
    if int(new) < int(saved):
        return f"the run has {int(saved)} steps; steps may only grow on resume"
    return None


# CLI fields -> the dotted key (or regex) they set, as explicit flags (the last layer).
FLAG_KEYS: dict[str, str] = {
    "env": "task",
    "steps": "run.steps",
    "eval_every": "run.eval_every_rows",
    "eval_episodes": "run.eval_eps",
    "num_envs": "run.num_envs",
    "train_ratio": "run.train_ratio",
    "checkpoint_every": "run.checkpoint_every",
    "report_every": "run.report_every_logs",
    "driver_parallel": "run.driver_parallel",
    "twohot_mean": "twohot_mean",
    "reference": "reference",
    "cnn_mults": r"(enc|dec)\.simple\.mults",
    "cnn_minres": r"(enc|dec)\.simple\.minres",
    "data_devices": "jax.train_devices",
}

# CLI fields whose value is spelled otherwise than their key's: field -> the key's value.
FLAG_VALUES = {"data_devices": lambda n: list(range(n)) if n > 0 else [n]}


# ---------------------------------------------------------------------------------------
# Field types


@functools.cache  # validate asks for every key's, and every entry of a run validates
def _field_type(path: str) -> Any:
    """The annotated type of a Config field path, e.g. 'agent.rssm.deter' -> int."""
    cls: Any = Config
    typ: Any = None
    for part in path.split("."):
        typ = typing.get_type_hints(cls)[part]
        cls = typ
    return typ


def _get(config: Any, path: str) -> Any:
    for part in path.split("."):
        config = getattr(config, part)
    return config


def _type_name(typ: Any) -> str:
    origin = typing.get_origin(typ)
    if origin is tuple:
        args = typing.get_args(typ)
        inner = args[0].__name__
        return f"list of {inner}" if args[-1] is Ellipsis else f"list of {len(args)} {inner}"
    return typ.__name__


def _coerce(key: str, value: Any, typ: Any) -> Any:
    """value as typ (the reference's rules: an integral float is an int, an int is a float;
    a list may be a comma-separated string), else ConfigError naming the key."""
    def bad() -> ConfigError:
        return ConfigError(f"{key}: expects {_type_name(typ)}, got {value!r}")

    origin = typing.get_origin(typ)
    if origin is tuple:
        args = typing.get_args(typ)
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise bad()
        if args[-1] is not Ellipsis and len(items) != len(args):
            raise bad()
        if not items:
            raise bad()
        if isinstance(value, str):
            items = [_parse_scalar(x.strip()) for x in items]
        try:
            return tuple(_coerce(key, x, args[0]) for x in items)
        except ConfigError:
            raise bad() from None
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise bad()
    if typ is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            return int(value)
        raise bad()
    if typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad()
    if typ is str:
        if isinstance(value, str):
            return value
        raise bad()
    raise TypeError(f"{key}: unsupported field type {typ}")


# ---------------------------------------------------------------------------------------
# YAML scalars as the reference's ruamel reads them (YAML 1.2): 5e6 and 1.1e5 are numbers,
# and only true / false are booleans (`impl: off` is the string 'off', not False).


def _yaml_loader():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    bool_tag = "tag:yaml.org,2002:bool"
    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != bool_tag]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver(bool_tag, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                 list("tTfF"))
    float12 = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", float12,
                                 list("-+0123456789."))
    return Loader


def _parse_scalar(text: str) -> Any:
    """A --set value as YAML reads it: 5e6 -> 5000000.0, [1, 2] -> [1, 2], True -> True."""
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader()) if text.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"cannot read {text!r} as a YAML value: {e}") from None


# ---------------------------------------------------------------------------------------
# Dotted form <-> Config


def flatten(mapping: Mapping, prefix: str = "") -> dict[str, Any]:
    """Nested dict -> dotted keys; a regex part joins with an escaped dot, as the
    reference's Config._flatten (embodied/core/config.py:134-146)."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        key = str(key)
        full = key
        if prefix:
            sep = "\\." if (IS_PATTERN.match(prefix) or IS_PATTERN.match(key)) else "."
            full = f"{prefix}{sep}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, full))
        else:
            out[full] = value
    return out


def to_dotted(config: Config) -> dict[str, Any]:
    """Every key of KEYS with this config's value (reference units: batch_length includes
    replay_context). Tuples stay tuples."""
    flat = {key: _get(config, path) for key, path in KEYS.items()}
    flat["batch_length"] = config.run.batch_length + config.run.replay_context
    return flat


def _widths(agent: AgentConfig) -> tuple:
    r = agent.rssm
    return (r.deter, r.hidden, r.classes, r.stoch, agent.enc.depth, agent.dec.depth,
            *(getattr(agent, m).units for m in ("enc", "dec", "rewhead", "conhead", "actor",
                                                 "critic")))


def size_label(agent: AgentConfig) -> str:
    """The size preset whose widths (RSSM, MLP units, CNN depth) this agent has, 'tiny', or
    'custom'."""
    widths = _widths(agent)
    for name in SIZES:
        if _widths(agent_config(name, reference=agent.reference)) == widths:
            return name
    return "tiny" if _widths(tiny_agent_config()) == widths else "custom"


def from_dotted(flat: Mapping[str, Any]) -> Config:
    """Config from a complete dotted mapping (KEYS; FIXED keys are ignored)."""
    nested = Config().to_dict()
    for key, path in KEYS.items():
        value = flat[key]
        if key == "batch_length":
            value = value - flat["replay_context"]
        node = nested
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        node[last] = list(value) if isinstance(value, tuple) else value
    config = from_dict(nested)
    return dataclasses.replace(config, size=size_label(config.agent))


def dotted_json(config: Config) -> str:
    """The config's dotted form as JSON (sorted keys), loadable by `--config`."""
    return json.dumps(to_dotted(config), indent=2, sort_keys=True)


def dump(config: Config, path: str | Path) -> None:
    """Write the dotted form to a .json or .yaml/.yml file."""
    path = Path(path)
    flat = {k: list(v) if isinstance(v, tuple) else v for k, v in to_dotted(config).items()}
    if path.suffix == ".json":
        path.write_text(json.dumps(flat, indent=2, sort_keys=True) + "\n")
    elif path.suffix in (".yaml", ".yml"):
        import yaml
        path.write_text(yaml.safe_dump(flat, sort_keys=True))
    else:
        raise ConfigError(f"--config {path}: write .json, .yaml or .yml")


def load_file(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON config file -> dotted keys (nested sections are flattened).

    A run's own config.json (our field form: `agent`, `run`, ... sections, plus `seeds`)
    is read as the Config it holds; its seeds are not applied (give --seeds).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--config {path}: cannot be read: {e}") from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml
            data = yaml.load(text, Loader=_yaml_loader())
        else:
            raise ConfigError(f"--config {path}: a .json, .yaml or .yml file is needed")
    except (json.JSONDecodeError, ImportError) as e:
        raise ConfigError(f"--config {path}: cannot be read: {e}") from None
    except Exception as e:  # yaml.YAMLError and its subclasses
        if type(e).__module__.startswith("yaml"):
            raise ConfigError(f"--config {path}: cannot be read: {e}") from None
        raise
    if not isinstance(data, Mapping):
        raise ConfigError(f"--config {path}: holds a {type(data).__name__}, not a mapping")
    if _is_field_form(data):
        fields = {k: v for k, v in data.items() if k != "seeds"}
        try:
            return to_dotted(from_dict(fields))
        except TypeError as e:
            raise ConfigError(f"--config {path}: not a dreamerjax config ({e})") from None
    return _without_retired(flatten(data))


def _is_field_form(data: Mapping) -> bool:
    return isinstance(data.get("agent"), Mapping) and isinstance(data.get("run"), Mapping) \
        and "rssm" in data["agent"]


# ---------------------------------------------------------------------------------------
# Named configs (configs.yaml @29eb964, the lines given; only keys that apply here)


def _size_preset(deter: int, hidden: int, classes: int, depth: int, units: int) -> dict:
    # configs.yaml:148-176: the RSSM, every CNN depth and every MLP width.
    return {"dyn.rssm.deter": deter, "dyn.rssm.hidden": hidden, "dyn.rssm.classes": classes,
            r".*\.depth": depth, r".*\.units": units}


_SIZE12M = _size_preset(**SIZES["12m"])

NAMED: dict[str, dict[str, Any]] = {
    # size1m is ours (the protocol's model); size12m ... size400m are the reference's.
    **{f"size{name}": _size_preset(**s) for name, s in SIZES.items()},
    # The fixtures' tiny network (ours; config.TINY).
    "tiny": {"dyn.rssm.deter": TINY["deter"], "dyn.rssm.hidden": TINY["hidden"],
             "dyn.rssm.classes": TINY["classes"], "dyn.rssm.stoch": TINY["stoch"],
             r".*\.units": TINY["units"], r".*\.depth": TINY["depth"]},
    # :192-199; enc/dec.spaces 'image' are left to the suite's observation keys.
    "atari": {"task": "atari_pong", "env.atari.size": [96, 96],
              r"(enc|dec).simple.minres": 6, "run.steps": 5.1e7},
    # :211-218
    "atari100k": {"task": "atari_pong", "run.steps": 1.1e5, "run.num_envs": 1,
                  "run.train_ratio": 256},
    # :220-230 (without its logger keys)
    "crafter": {"task": "crafter_reward", "run.num_envs": 1, "run.train_ratio": 512,
                "run.steps": 1.1e6},
    # :232-237
    "dmc_proprio": {**_SIZE12M, "task": "dmc_walker_walk", "run.train_ratio": 512,
                    "run.steps": 3e5, "env.dmc.image": False},
    # :239-245
    "dmc_vision": {**_SIZE12M, "task": "dmc_walker_walk", "run.train_ratio": 512,
                   "run.steps": 6e5, "enc.spaces": "image", "dec.spaces": "image"},
    # :275-288 without the jax, wrapper.checks, report and seconds-of-wall-clock keys.
    "debug": {"wrapper.length": 100, "run.num_envs": 4, "run.train_ratio": 8,
              "run.driver_parallel": False,
              "batch_size": 4, "batch_length": 12, "replay.size": 1e4,
              r"(rewhead|critic).bins": 9,
              "dyn.rssm.deter": 12, "dyn.rssm.hidden": 8, "dyn.rssm.stoch": 4,
              "dyn.rssm.classes": 4, "dyn.rssm.blocks": 4,
              r".*\.layers": 2, r".*\.units": 8, r".*\.depth": 2},
}


# ---------------------------------------------------------------------------------------
# Resolving


@dataclass(frozen=True)
class Provenance:
    """Where each value came from: the layers in the order applied, and for each dotted
    key the layer that set it last ('defaults' if none)."""

    layers: tuple[str, ...]
    origin: Mapping[str, str]

    def changed(self) -> dict[str, str]:
        return {k: v for k, v in self.origin.items() if v != "defaults"}


def _reason(key: str) -> str | None:
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        reason = REFUSED.get(".".join(parts[:i]))
        if reason is not None:
            return reason
    return None


def known_keys() -> list[str]:
    return [*KEYS, *FIXED]


def _unknown(key: str, origin: str) -> ConfigError:
    reason = _reason(key)
    if reason is not None:
        return ConfigError(f"{origin}: key {key!r} does not apply here: {reason}")
    close = difflib.get_close_matches(key, known_keys(), n=3, cutoff=0.6)
    hint = f"; closest: {', '.join(close)}" if close else ""
    return ConfigError(f"{origin}: unknown key {key!r}{hint}")


def _version_keys(reference: str) -> tuple[dict[str, tuple[str, ...]], dict]:
    """(key -> internal keys it sets, fixed keys) of a reference version's spelling."""
    if reference == HEAD_REF:
        return versions.head_table(OUR_KEYS, KEYS), versions.HEAD_FIXED
    return {k: (k,) for k in KEYS}, FIXED


def _targets(key: str, origin: str, full: bool, reference: str | None = None) -> list[str]:
    """The known keys a (possibly regex) key sets (in `reference`'s spelling if given)."""
    if reference is not None:
        return _version_targets(key, origin, full, reference)
    if not IS_PATTERN.match(key):
        if key in KEYS or key in FIXED:
            return [key]
        raise _unknown(key, origin)
    return _pattern_targets(key, origin, full, known_keys(), "")


def _pattern_targets(key: str, origin: str, full: bool, candidates, of: str) -> list[str]:
    """The candidate keys a regex key matches (fullmatch when `full`); ConfigError naming
    the key when it is no regex or matches none."""
    try:
        pattern = re.compile(key)
    except re.error as e:
        raise ConfigError(f"{origin}: key {key!r} is not a valid regex: {e}") from None
    match = pattern.fullmatch if full else pattern.match
    keys = [k for k in candidates if match(k)]
    if not keys:
        raise ConfigError(f"{origin}: pattern {key!r} matches no key{of}")
    return keys


def _version_targets(key: str, origin: str, full: bool, reference: str) -> list[str]:
    """The version-spelled keys (of _version_keys) a key sets; a key of the other version
    is refused with the reason."""
    table, fixed = _version_keys(reference)
    if not IS_PATTERN.match(key):
        if key in table or key in fixed:
            return [key]
        why = versions.refusal(key, reference, OUR_KEYS)
        if why is not None:
            raise ConfigError(f"{origin}: {why}")
        if reference == HEAD_REF and key in KEYS:
            raise ConfigError(f"{origin}: key {key!r} exists only at 29eb964, not at "
                              f"{HEAD_REF}")
        raise _unknown(key, origin)
    return _pattern_targets(key, origin, full, [*table, *fixed], f" of {reference}")


def _same_fixed(value: Any, fixed: Any) -> bool:
    if isinstance(fixed, tuple):
        return isinstance(value, (list, tuple)) and tuple(value) == fixed
    if isinstance(fixed, bool) or isinstance(value, bool):
        return value is fixed
    if isinstance(fixed, float) and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return False
    return value == fixed


def _apply(flat: dict, origin: dict, updates: Mapping[str, Any], label: str,
           full: bool, reference: str | None = None) -> None:
    """Set `updates` on the internal dotted `flat`; keys are spelled as `reference` spells
    them (None: the internal, 29eb964 spelling, as the flags are)."""
    table, fixed_keys = _version_keys(reference or REFERENCES[0])
    for key, value in updates.items():
        for target in _targets(key, label, full, reference):
            if target in fixed_keys:
                fixed, reason = fixed_keys[target]
                if not _same_fixed(value, fixed):
                    why = "" if reason == _NOT_CONFIGURABLE else f" ({reason})"
                    raise ConfigError(f"{label}: {target}={value!r} is not supported: only "
                                      f"{fixed!r} is implemented{why}")
                continue
            if target == "reference" and reference is not None and value != reference:
                raise ConfigError(f"{label}: reference={value!r} after the run chose "
                                  f"{reference!r}: give the version once")
            for internal in table[target]:
                try:
                    flat[internal] = _coerce(internal, value, _field_type(KEYS[internal]))
                except ConfigError as e:
                    raise ConfigError(f"{label}: {target}: {e}") from None
                origin[internal] = label


def agent_from_reference(flat: Mapping[str, Any], reference: str) -> AgentConfig:
    """The agent config a reference's own full config gives (its dotted keys, spelled as
    `reference` spells them, e.g. a fixture's config dump): every key that sets an agent
    field is applied over that version's defaults; the others (the run, the replay,
    logging, the reference's process layout) cannot change a loss or an update and are
    left out, as are the options of which only one value is implemented (FIXED: the caller
    checks those its use depends on)."""
    table, _ = _version_keys(reference)
    agent = {k: v for k, v in flat.items()
             if any(KEYS[t].startswith("agent.") for t in table.get(k, ()))}
    dotted = to_dotted(versions.default_config(reference))
    _apply(dotted, dict.fromkeys(dotted, "defaults"), agent, "the reference's config",
           full=True, reference=reference)
    return from_dotted(dotted).agent


def parse_set(item: str) -> tuple[str, Any]:
    """'KEY=VALUE' -> (key, YAML value)."""
    key, sep, text = item.partition("=")
    key = key.strip().removeprefix("--")
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: write KEY=VALUE, e.g. run.train_ratio=256")
    return key, _parse_scalar(text)


def _is_key_flag(name: str) -> bool:
    """A reference-style flag name (`run.train_ratio`, `.*\\.units`): a dotted or pattern
    key, or a known key, refused key or prefix."""
    return bool(IS_PATTERN.match(name)) or name in KEYS or name in FIXED or \
        _reason(name) is not None or "." in name


def rewrite_key_flags(argv: Sequence[str], own: Iterable[str]) -> list[str]:
    """The reference's flag form `--run.train_ratio 32` (or `--run.train_ratio=32`; several
    values make a list) -> `--set run.train_ratio=32`, for every `--NAME` that is not one of
    the command's own flags (`own`, without dashes) and names a config key (embodied/core/
    flags.py:34-48 reads flags so). Other arguments are kept in order."""
    own = {o.replace("-", "_") for o in own}
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if not name or name.replace("-", "_") in own or not _is_key_flag(name):
            out.append(arg)
            i += 1
            continue
        values = [value] if eq else []
        i += 1
        while not eq and i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        if not values:
            raise ConfigError(f"--{name}: needs a value (--{name} VALUE or --{name}=VALUE)")
        out += ["--set", f"{name}={values[0] if len(values) == 1 else ','.join(values)}"]
    return out


def resolve(configs: Sequence[str] = (), sets: Sequence[str] = (),
            config_file: str | Path | None = None,
            run_fields: Mapping[str, Any] | None = None,
            **cli_fields: Any) -> tuple[Config, Provenance]:
    """The run's Config from the layers (module docstring), validated.

    cli_fields are the CLI's explicit flags by field name (FLAG_KEYS, plus `size` and
    `tiny`, which append the named configs size<S> / tiny); None means not given.
    run_fields: RunConfig fields by name, set after the flags (make_config's fields that
    have no flag), so that the config is validated whole.
    """
    file_keys = load_file(config_file) if config_file is not None else {}
    reference, ref_label = _chosen_reference(file_keys, sets, cli_fields.pop("reference", None))
    flat: dict[str, Any] = to_dotted(versions.default_config(reference))
    origin = dict.fromkeys(flat, "defaults")
    layers = ["defaults" if reference == REFERENCES[0] else f"defaults ({reference})"]
    if config_file is not None:
        label = f"--config {config_file}"
        _apply(flat, origin, file_keys, label, full=False, reference=reference)
        layers.append(label)
    named = [(name, f"--configs {name}") for name in configs]
    size, tiny = cli_fields.pop("size", None), cli_fields.pop("tiny", False)
    if size is not None:
        named.append((f"size{size}", f"--size {size}"))
    if tiny:
        named.append(("tiny", "--tiny"))
    table = versions.HEAD_NAMED if reference == HEAD_REF else NAMED
    for name, label in named:
        if name not in table and label.startswith("--size "):
            known = [n.removeprefix("size") for n in table if n.startswith("size")]
            raise ConfigError(f"--size {size!r}: known sizes are {', '.join(known)}")
        if name not in table:
            close = difflib.get_close_matches(name, list(table), n=3, cutoff=0.5)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise ConfigError(f"{label}: unknown config name of {reference} (known: "
                              f"{', '.join(table)}){hint}")
        _apply(flat, origin, table[name], label, full=False, reference=reference)
        layers.append(label)
    for item in sets:
        key, value = parse_set(item)
        label = f"--set {item}"
        _apply(flat, origin, {key: value}, label, full=True, reference=reference)
        layers.append(label)
    flat["reference"] = reference
    origin["reference"] = ref_label
    for name, value in cli_fields.items():
        if name not in FLAG_KEYS:
            raise TypeError(f"resolve() got an unknown CLI field {name!r}")
        if value is None:
            continue
        label = f"--{name.replace('_', '-')}"
        _check_flag_version(FLAG_KEYS[name], label, reference)
        value = FLAG_VALUES.get(name, lambda v: v)(value)
        _apply(flat, origin, {FLAG_KEYS[name]: value}, label, full=True)
        layers.append(label)
    config = from_dotted(flat)
    if run_fields:
        config = dataclasses.replace(config, run=dataclasses.replace(config.run, **run_fields))
    validate(config)
    return config, Provenance(tuple(layers), origin)


def _check_flag_version(key: str, label: str, reference: str) -> None:
    """A flag sets internal (29eb964-spelled) keys: refuse it when the run's version has
    none of them (e.g. --cnn-minres at HEAD, whose CNN has no minres key)."""
    if reference != HEAD_REF:
        return
    reachable = {k for ts in versions.head_table(OUR_KEYS, KEYS).values() for k in ts}
    missing = [t for t in _targets(key, label, True) if t not in reachable]
    if missing:
        raise ConfigError(f"{label}: sets {', '.join(missing)}, which {HEAD_REF} does not "
                          f"have (a key of 29eb964 only)")


def _chosen_reference(file_keys: Mapping[str, Any], sets: Sequence[str],
                      flag: str | None) -> tuple[str, str]:
    """(version, where it was given) of a run: the --reference flag, else the last --set
    reference=..., else the config file's, else 29eb964. Chosen first, since it decides
    how every other key is spelled and what the defaults are."""
    chosen, label = REFERENCES[0], "defaults"
    if "reference" in file_keys:
        chosen, label = file_keys["reference"], "--config"
    for item in sets:
        key, value = parse_set(item)
        if key == "reference":
            chosen, label = value, f"--set {item}"
    if flag is not None:
        chosen, label = flag, "--reference"
    if chosen not in REFERENCES:
        raise ConfigError(f"{label}: reference {chosen!r}; choose one of "
                          f"{', '.join(REFERENCES)}")
    return chosen, label


def _set_dotted(config: Config, sets: Sequence[str]) -> tuple[dict, dict]:
    """(dotted keys -> values, dotted keys -> the layer that set them) of config with
    `--set KEY=VALUE` items applied in order, in the spelling of config's version."""
    flat = to_dotted(config)
    origin = dict.fromkeys(flat, "config")
    for item in sets:
        key, value = parse_set(item)
        _apply(flat, origin, {key: value}, f"--set {item}", full=True,
               reference=config.agent.reference)
    return flat, origin


def with_sets(config: Config, sets: Sequence[str]) -> Config:
    """config with `--set KEY=VALUE` items applied in order (resolve's --set layer on a
    given base, e.g. the bench's configuration), validated."""
    out = from_dotted(_set_dotted(config, sets)[0])
    validate(out)
    return out


def resumable_keys() -> tuple[str, ...]:
    """The keys whose field may differ on resume (RESUMABLE_FIELDS)."""
    return tuple(key for key, path in KEYS.items() if path in RESUMABLE_FIELDS)


def with_resumed_sets(config: Config, sets: Sequence[str]) -> Config:
    """A resumed run's config with `--set KEY=VALUE` items applied in order: only keys
    that may change on resume (resumable_keys, e.g. logger.outputs), else ConfigError
    naming the item and the key. Not validated here (the caller validates the whole)."""
    flat = to_dotted(config)
    new, origin = _set_dotted(config, sets)
    for key, value in new.items():
        if value != flat[key] and key not in resumable_keys():
            raise NotResumable(f"{origin[key]}: {key} cannot change on --resume (keys that "
                               f"may: {', '.join(resumable_keys())})")
    return dataclasses.replace(from_dotted(new), size=config.size)


def from_mapping(updates: Mapping[str, Any], label: str = "config") -> Config:
    """The defaults with a dotted mapping applied (types checked as for --set), validated:
    e.g. the dotted JSON of an exported policy."""
    flat: dict[str, Any] = to_dotted(Config())
    _apply(flat, dict.fromkeys(flat, "defaults"), _without_retired(flatten(updates)), label,
           full=True)
    config = from_dotted(flat)
    validate(config)
    return config


def make_config(env: str | None = None, *, size: str | None = None, tiny: bool = False,
                configs: Sequence[str] = (), sets: Sequence[str] = (),
                reference: str | None = None, **fields: Any) -> Config:
    """The Config of a new run, resolved as `dreamerjax train` resolves its flags (resolve:
    defaults < configs < sets < the flags), validated; ConfigError naming the key.

        make_config("CartPole-v1", configs=["size12m"], sets=["opt.lr=1e-4"], steps=40000)

    env: the task (--env; None: the defaults' or a named config's). size, tiny: the size
    preset (--size, --tiny: named configs applied after `configs`; None and False: the
    defaults' 1m or a named config's). configs: named configs (--configs), left to right.
    sets: "key=value" items in the reference's dotted keys (--set), in order. reference:
    the version (a Reference or its string; --reference); None is 29eb964 unless an item
    of `sets` names one. fields: the command line's other flags by their field names
    (steps, eval_every, eval_episodes, num_envs, train_ratio, checkpoint_every,
    report_every, twohot_mean, cnn_mults, cnn_minres, ...: FLAG_KEYS) and any other
    RunConfig field by name (batch_size, replay_capacity, seed_loop, ...), both last;
    a RunConfig field takes the value as the field holds it (batch_length counts the
    trained rows, the dotted key `batch_length` the context row too).
    """
    flags = {name: value for name, value in fields.items() if name in FLAG_KEYS}
    run_fields = {name: value for name, value in fields.items() if name not in FLAG_KEYS}
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(run_fields) - known)
    if unknown:
        raise TypeError(f"make_config() got an unknown field {unknown[0]!r}: give a flag "
                        f"({', '.join(FLAG_KEYS)}) or a RunConfig field")
    config, _ = resolve(configs, sets, size=size, tiny=tiny, env=env, run_fields=run_fields,
                        reference=None if reference is None else str(reference), **flags)
    return config


# ---------------------------------------------------------------------------------------
# Checks (before anything compiles); each names the key. validate is the one check of a
# run's values: the command line, dreamerjax.train and run/setup.make_setup all call it.


_POSITIVE = (
    "run.steps", "run.num_envs", "run.eval_eps", "run.eval_every_rows", "replay.size",
    "batch_size", "imag_length", "horizon", "dyn.rssm.deter", "dyn.rssm.hidden",
    "dyn.rssm.stoch", "dyn.rssm.classes", "dyn.rssm.blocks", "dyn.rssm.imglayers",
    "dyn.rssm.obslayers", "dyn.rssm.dynlayers", "enc.simple.depth", "enc.simple.units",
    "enc.simple.kernel", "enc.simple.minres", "dec.simple.depth", "dec.simple.units",
    "dec.simple.kernel", "dec.simple.minres", "dec.simple.block_space", "rewhead.units",
    "conhead.units", "actor.units", "critic.units", "slow_critic_update",
)
_NON_NEGATIVE = (
    "run.train_fill", "run.replay_capacity", "run.checkpoint_every",
    "run.report_every_logs", "wrapper.length",
    "enc.simple.layers", "dec.simple.layers", "rewhead.layers", "conhead.layers",
    "actor.layers", "critic.layers", "opt.warmup",
)
_UNIT_INTERVAL = ("dyn.rssm.unimix", "actor.unimix", "return_lambda", "return_lambda_replay",
                  "slow_critic_fraction", "retnorm.rate")
# Upper bounds: counters are int32 on device; beyond these a value is a typo, and refusing
# it here costs nothing while finding out later costs a compile.
INT32_MAX = 2**31 - 1
_AT_MOST = {
    **dict.fromkeys(("run.steps", "run.eval_every_rows", "run.checkpoint_every",
                     "run.report_every_logs"), INT32_MAX),
    **dict.fromkeys(("run.num_envs", "run.eval_eps", "run.train_ratio"), 2**20),
    **dict.fromkeys(("enc.simple.minres", "dec.simple.minres"), 2**12),
}
_MULTS_AT_MOST = 2**10


def validate(config: Config, *, seeds: Sequence[int] | None = None) -> None:
    """Raise ConfigError (one line, naming the key) for a config that cannot run, and for
    seeds (when given) that cannot share one run. The checks against the env's spaces
    (the CNN geometry of its image keys) follow in run/setup.make_setup, which starts
    with this one."""
    flat = to_dotted(config)
    _check_types(flat)
    _check_ranges(flat)
    _check_log_points(flat)
    _check_model_and_batch(flat, config)
    _check_env_sections(flat)
    _check_choices(flat)
    try:  # the training options' values per version (opt, valnorm, advnorm, ...)
        check_agent_options(config.agent)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    _check_one_version(flat)
    _check_train_devices(flat, config)
    if seeds is not None:
        check_seeds(seeds)


def check_seeds(seeds: Sequence[int]) -> None:
    """The seeds of one run: at least one, each once, in 0 ... 2^31 - 1 (PRNGKey(seed))."""
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds: needs at least one seed")
    if any(not isinstance(s, int) or isinstance(s, bool) for s in seeds):
        raise ConfigError(f"seeds: must be integers, got {seeds}")
    if len(set(seeds)) != len(seeds):
        dup = sorted({s for s in seeds if seeds.count(s) > 1})
        raise ConfigError(f"seeds: must be unique; repeated: {dup}")
    if any(s < 0 for s in seeds):
        raise ConfigError(f"seeds: must be non-negative, got {seeds}")
    if max(seeds) > INT32_MAX:
        raise ConfigError(f"seeds: {max(seeds)}: at most {INT32_MAX}")


def _check_types(flat: dict[str, Any]) -> None:
    """Each value of its field's type: resolve coerces what it sets, a Config built in
    Python is taken as it is (an int where a float goes is fine, not the reverse)."""
    for key, path in KEYS.items():
        typ, value = _field_type(path), flat[key]
        _coerce(key, value, typ)
        inner = typing.get_args(typ)[0] if typing.get_origin(typ) is tuple else typ
        items = value if typing.get_origin(typ) is tuple else (value,)
        if inner is int and any(not isinstance(v, int) for v in items):
            raise ConfigError(f"{key}: expects {_type_name(typ)}, got {value!r}")


def _check_log_points(flat: dict[str, Any]) -> None:
    """Log points fall on whole ticks (every env steps once a tick) and end the run."""
    steps, every, envs = flat["run.steps"], flat["run.eval_every_rows"], flat["run.num_envs"]
    if every % envs:
        raise ConfigError(f"run.eval_every_rows: {every} must be a multiple of run.num_envs "
                          f"({envs}): a log point comes after a whole tick of every env")
    if steps % every:
        raise ConfigError(f"run.eval_every_rows: {every} must divide run.steps ({steps}) so "
                          "the run ends on a log point")


def _check_train_devices(flat: dict[str, Any], config: Config) -> None:
    """The data-parallel devices of a seed: numbered 0 ... N-1, splitting its envs and its
    batch evenly; HEAD's mesh shape fits them and has no tensor axis."""
    devices = list(flat["jax.train_devices"])
    n = len(devices)
    if devices != list(range(n)):
        raise ConfigError(f"jax.train_devices: expects the devices 0 ... N-1 of a seed's "
                          f"group (as --data-devices N sets), got {devices}")
    for key in ("run.num_envs", "batch_size"):
        if flat[key] % n:
            raise ConfigError(f"{key}: {flat[key]} cannot be split evenly over the {n} "
                              "train devices (jax.train_devices)")
    try:
        _, fsdp, tensor = mesh_shape(config.run)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if tensor != 1:
        raise ConfigError("jax.train_mesh: the tensor axis 't' must be 1: HEAD shards no "
                          "DreamerV3 parameter over it (its agent has no partition rules), "
                          "so it would only repeat the work")
    if fsdp != 1 and config.agent.reference != HEAD_REF:
        raise ConfigError(f"jax.train_mesh: the FSDP axis 'f' is HEAD's (--reference "
                          f"{HEAD_REF}); {config.agent.reference} has none: split the batch "
                          "with 'd' (or jax.train_devices)")


def _check_ranges(flat: dict[str, Any]) -> None:
    """Signs, unit intervals, finite numbers, non-empty strings, bin counts."""
    for key in _POSITIVE:
        if flat[key] <= 0:
            raise ConfigError(f"{key}: must be positive, got {flat[key]}")
    for key in _NON_NEGATIVE:
        if flat[key] < 0:
            raise ConfigError(f"{key}: must be >= 0, got {flat[key]}")
    for key in _UNIT_INTERVAL:
        if not 0.0 <= flat[key] <= 1.0:
            raise ConfigError(f"{key}: must be in [0, 1], got {flat[key]}")
    for key, path in KEYS.items():
        value = flat[key]
        if (isinstance(value, float) and not math.isfinite(value)
                and not (key in MAY_BE_INFINITE and value == math.inf)):
            raise ConfigError(f"{key}: must be finite, got {value}")
        if _field_type(path) is str and not value.strip() and key not in MAY_BE_EMPTY:
            raise ConfigError(f"{key}: must not be empty")
    if flat["run.train_ratio"] <= 0:
        raise ConfigError(f"run.train_ratio: must be positive, got {flat['run.train_ratio']}")
    for key in ("rewhead.bins", "critic.bins"):
        if flat[key] < 2:
            raise ConfigError(f"{key}: needs at least 2 bins, got {flat[key]}")
    for key, limit in _AT_MOST.items():
        if flat[key] > limit:
            raise ConfigError(f"{key}: at most {limit}, got {flat[key]}")


def _check_model_and_batch(flat: dict[str, Any], config: Config) -> None:
    """The block GRU's split, the replay context, the batch length against the replay,
    the CNN multipliers."""
    deter, blocks = flat["dyn.rssm.deter"], flat["dyn.rssm.blocks"]
    if deter % blocks:
        raise ConfigError(f"dyn.rssm.deter: {deter} is not divisible by dyn.rssm.blocks "
                          f"{blocks} (the block GRU splits deter into equal blocks)")
    if flat["replay_context"] != 1:
        raise ConfigError(f"replay_context: only 1 is implemented, got "
                          f"{flat['replay_context']}")
    length = flat["batch_length"]
    if length <= flat["replay_context"]:
        raise ConfigError(f"batch_length: {length} rows leave none to train after "
                          f"replay_context {flat['replay_context']}")
    rows = replay_rows_per_env(config.run)
    if length > rows:
        source = ("run.replay_capacity" if config.run.replay_capacity
                  else "min(replay.size, run.steps) / run.num_envs")
        raise ConfigError(f"batch_length: {length} rows are longer than the replay "
                          f"({rows} rows per env = {source})")
    for key in ("enc.simple.mults", "dec.simple.mults"):
        if not flat[key] or any(m <= 0 for m in flat[key]):
            raise ConfigError(f"{key}: needs one or more positive multipliers, got "
                              f"{list(flat[key])}")
        if max(flat[key]) > _MULTS_AT_MOST:
            raise ConfigError(f"{key}: at most {_MULTS_AT_MOST} per stage, got "
                              f"{list(flat[key])}")


def _check_env_sections(flat: dict[str, Any]) -> None:
    """The suites' image sizes and action repeats, the encoder/decoder space regexes."""
    for suite in ("atari", "atari100k", "crafter", "dmc", "craftax"):
        key = f"env.{suite}.size"
        if len(flat[key]) != 2 or any(n <= 0 for n in flat[key]):
            raise ConfigError(f"{key}: needs two positive sizes, got {list(flat[key])}")
    for suite in ("playground", "brax"):
        key = f"env.{suite}.repeat"
        if flat[key] < 1:
            raise ConfigError(f"{key}: the action repeat needs to be at least 1, got "
                              f"{flat[key]}")
    for key in ("enc.spaces", "dec.spaces"):
        try:
            re.compile(flat[key])
        except re.error as e:
            raise ConfigError(f"{key}: {flat[key]!r} is not a valid regex: {e}") from None


def _check_choices(flat: dict[str, Any]) -> None:
    """Keys that name one of a fixed set: compute dtype, seed loop, two-hot mean."""
    dtype = flat["jax.compute_dtype"]
    if dtype in REFUSED_COMPUTE_DTYPES:
        raise ConfigError(f"jax.compute_dtype: {dtype!r} is not supported: "
                          f"{REFUSED_COMPUTE_DTYPES[dtype]}")
    if dtype not in COMPUTE_DTYPES:
        raise ConfigError(f"jax.compute_dtype: {dtype!r}; choose one of "
                          f"{', '.join(COMPUTE_DTYPES)}")
    if flat["run.seed_loop"] not in SEED_LOOPS:
        raise ConfigError(f"run.seed_loop: {flat['run.seed_loop']!r}; choose one of "
                          f"{', '.join(SEED_LOOPS)}")
    if flat["reference"] not in REFERENCES:
        raise ConfigError(f"reference: {flat['reference']!r}; choose one of "
                          f"{', '.join(REFERENCES)}")
    if flat["twohot_mean"] not in TWOHOT_MEANS:
        raise ConfigError(f"twohot_mean: {flat['twohot_mean']!r}; choose one of "
                          f"{', '.join(TWOHOT_MEANS)}")
    _validate_logger(flat)
    _check_replay_selectors(flat)


# replay.priosignal values (agent.py:204-221 @29eb964).
PRIOSIGNALS = ("model", "td", "all")


def _check_replay_selectors(flat: Mapping[str, Any]) -> None:
    """replay.fracs: three non-negative fractions summing to 1 (selectors.py:187
    @29eb964); replay.prio.maxfrac in [0, 1] (:117); priorities non-negative."""
    fracs = {k: flat[f"replay.fracs.{k}"] for k in ("uniform", "priority", "recency")}
    if min(fracs.values()) < 0 or abs(sum(fracs.values()) - 1) > 1e-6:
        raise ConfigError("replay.fracs: " + ", ".join(f"{k}={v}" for k, v in fracs.items())
                          + "; the fractions must be >= 0 and sum to 1")
    if not 0 <= flat["replay.prio.maxfrac"] <= 1:
        raise ConfigError(f"replay.prio.maxfrac: {flat['replay.prio.maxfrac']!r}; must be "
                          "in [0, 1]")
    if not flat["replay.prio.initial"] >= 0:
        raise ConfigError(f"replay.prio.initial: {flat['replay.prio.initial']!r}; must be "
                          ">= 0 (inf: new items first)")
    if flat["replay.priosignal"] not in PRIOSIGNALS:
        raise ConfigError(f"replay.priosignal: {flat['replay.priosignal']!r}; choose one of "
                          f"{', '.join(PRIOSIGNALS)}")


def _check_one_version(flat: Mapping[str, Any]) -> None:
    """Every part of the config is of its agent's version: an e3f0224 config holds the
    values e3f0224 fixes (versions.E3F0224_FIXED_FIELDS), which only a 29eb964 config
    whose `reference` was replaced can differ in (e.g. dataclasses.replace of a 29eb964
    agent: HEAD's code with 29eb964's CNN stages and policy)."""
    if flat["reference"] != HEAD_REF:
        return
    for key, (want, why) in versions.E3F0224_FIXED_FIELDS.items():
        if not _same_fixed(flat[key], want):
            raise ConfigError(
                f"{key}: {flat[key]!r} is a value of 29eb964 only; {HEAD_REF} fixes "
                f"{want!r} ({why} @{HEAD_REF}), so this config mixes the two versions: "
                f"make it with reference {HEAD_REF} (make_config(reference=...), "
                "--reference) rather than by replacing agent.reference")


def _validate_logger(flat: Mapping[str, Any]) -> None:
    outputs = flat["logger.outputs"]
    for name in outputs:
        if name not in LOGGER_OUTPUTS:
            raise ConfigError(f"logger.outputs: {name!r} is not an output here; choose from "
                              f"{', '.join(LOGGER_OUTPUTS)}")
    if len(set(outputs)) != len(outputs):
        raise ConfigError(f"logger.outputs: {list(outputs)} names an output twice")
    try:
        re.compile(flat["logger.filter"])
    except re.error as e:
        raise ConfigError(f"logger.filter: {flat['logger.filter']!r} is not a valid regex: "
                          f"{e}") from None


# ---------------------------------------------------------------------------------------
# Printing (dreamerjax info)


def describe(config: Config, provenance: Provenance) -> str:
    """The precedence, the layers applied and every key with its value and origin."""
    flat = to_dotted(config)
    reference = config.agent.reference
    lines = ["Precedence: defaults < --config FILE < --configs (left to right) "
             "< --set (in order) < explicit flags",
             "Layers applied: " + " < ".join(provenance.layers),
             f"Reference: danijar/dreamerv3 at {reference} (keys in its spelling)",
             f"Size: {config.size}", "Resolved config (key: value  [origin]):"]
    table, _ = _version_keys(reference)
    shown_keys = {k: targets[0] for k, targets in table.items()}
    width = max(len(k) for k in shown_keys)
    for key in sorted(shown_keys):
        value = flat[shown_keys[key]]
        origin_key = shown_keys[key]
        shown = json.dumps(list(value) if isinstance(value, tuple) else value)
        own = key in OUR_KEYS and not (reference != HEAD_REF and key in REFERENCE_KEYS)
        mark = "  (dreamerjax's own key)" if own else ""
        lines.append(f"  {key.ljust(width)}  {shown}  [{provenance.origin.get(origin_key, '?')}]"
                     f"{mark}")
    return "\n".join(lines)


def markdown_tables() -> str:
    """The key tables of docs/config.md (tests check that the page holds them)."""
    defaults = to_dotted(Config())

    def show(v: Any) -> str:
        return json.dumps(list(v) if isinstance(v, tuple) else v)

    out = ["| key | field | type | default |", "|---|---|---|---|"]
    for key, path in KEYS.items():
        own = "" if key in REFERENCE_KEYS else " (ours)"
        out.append(f"| `{key}`{own} | `{path}` | {_type_name(_field_type(path))} | "
                   f"`{show(defaults[key])}` |")
    out += ["", "Keys with one implemented value (accepted at it, refused otherwise):", "",
            "| key | value | why |", "|---|---|---|"]
    out += [f"| `{k}` | `{show(v)}` | {r} |" for k, (v, r) in FIXED.items()]
    out += ["", "Keys (and key prefixes) with no meaning here, refused:", "",
            "| key | why |", "|---|---|"]
    out += [f"| `{k}` | {r} |" for k, r in REFUSED.items()]
    out += ["", f"With `reference: {HEAD_REF}` keys take HEAD's spelling (configs.yaml "
            f"@{HEAD_REF}); these differ from the ones above (every other key of the first "
            "table that HEAD spells alike is unchanged; a key of one version is refused in "
            "the other):", "", "| HEAD key | sets |", "|---|---|"]
    out += [f"| `{k}` | {', '.join(f'`{t}`' for t in ts)} |"
            for k, ts in versions.HEAD_ALIASES.items()]
    out += ["", "HEAD keys with one implemented value:", "", "| key | value | why |",
            "|---|---|---|"]
    out += [f"| `{k}` | `{show(v)}` | {r} |" for k, (v, r) in versions.HEAD_FIXED.items()]
    return "\n".join(out) + "\n"


__all__ = [
    "ConfigError", "DEFAULT_SIZE", "FIXED", "FLAG_KEYS", "KEYS", "NAMED", "OUR_KEYS",
    "Provenance", "REFERENCE_KEYS", "REFUSED", "describe", "dotted_json", "dump",
    "flatten", "from_dotted", "from_mapping", "load_file", "markdown_tables", "parse_set",
    "resolve", "rewrite_key_flags", "to_dotted", "validate", "with_sets",
]
