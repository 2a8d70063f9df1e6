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

This module holds the tables and the named configs; the rest of the configuration's work
is in its neighbours: dotted.py (the dotted form, YAML / JSON files, the field types),
resolve.py (resolve, make_config, --set, the resumed run's merge), validate.py (the checks
of a run's values) and docs_tables.py (dreamerjax info's listing, docs/config.md's tables).
"""

from __future__ import annotations

import dataclasses
import os
import re
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from dreamerjax.config.defaults import SIZES, TINY, Config


class ConfigError(ValueError):
    """A configuration key or value that cannot run, found before anything compiles.

    fix: the changes any one of which would make the config run (validate checks every
    rule on each): a (dotted key, value) pair, or a tuple of such pairs made together;
    the message names them as the Python API spells them (make_config's arguments: a
    flag's field name, else `sets`), and the command line as its flags (fix_text).
    """

    def __init__(self, message: str, fix: Iterable[tuple[str, Any]] = ()) -> None:
        self.problem, self.fix = message, tuple(fix)
        super().__init__(message + fix_text(self.fix, python_spelling))


def python_spelling(key: str, value: Any) -> str:
    """A key's value as make_config takes it: `eval_every=400`, `sets=["k=v"]`."""
    flag = next((f for f, k in FLAG_KEYS.items() if k == key), None)
    return f"{flag}={value!r}" if flag else f'sets=["{key}={value}"]'


def cli_spelling(key: str, value: Any) -> str:
    """A key's value as the command line takes it: `--eval-every 400`, `--set k=v`."""
    flag = next((f for f, k in FLAG_KEYS.items() if k == key), None)
    return f"--{flag.replace('_', '-')} {value}" if flag else f"--set {key}={value}"


def fix_pairs(change: tuple) -> tuple[tuple[str, Any], ...]:
    """One fix of a ConfigError as its (dotted key, value) pairs."""
    return (change,) if isinstance(change[0], str) else tuple(change)


def fix_text(fix: tuple, spell) -> str:
    """'; pass A or B' of a ConfigError's fixes in one interface's spelling; a fix of
    several keys is one alternative (`--eval-every 256 --steps 1024`, and in Python
    `(eval_every=256, steps=1024)`)."""
    if not fix:
        return ""
    sep = " " if spell is cli_spelling else ", "

    def one(change) -> str:
        text = sep.join(spell(key, value) for key, value in fix_pairs(change))
        return text if len(fix_pairs(change)) == 1 or sep == " " else f"({text})"

    return "; pass " + " or ".join(one(change) for change in fix)


class NotResumable(ConfigError):
    """A key that cannot change when a run is resumed (with_resumed_sets)."""


IS_PATTERN = re.compile(r".*[^A-Za-z0-9_.-].*")  # embodied/core/config.py:11


# ---------------------------------------------------------------------------------------
# The key table: dotted key -> Config field path (the type is the field's)


def _group(prefix: str, path: str, names: Iterable[str]) -> dict[str, str]:
    return {f"{prefix}.{n}": f"{path}.{n}" for n in names}


# Fields of the reference's suite sections that are ours (in OUR_KEYS, not REFERENCE_KEYS).
_OWN_SUITE_FIELDS = {"atari": ("sticky_literal",), "atari100k": ("sticky_literal",),
                     "procgen": ("resize",)}  # a key of e3f0224 (configs.yaml:31) only


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
    "replay.chunksize": "run.replay_chunksize",  # :18
    # :14-17; the selector mixture (data/replay.py Selector).
    **{f"replay.fracs.{k}": f"run.replay_{k}" for k in ("uniform", "priority", "recency")},
    **{f"replay.prio.{k}": f"run.replay_prio_{k}"
       for k in ("exponent", "maxfrac", "initial", "zero_on_sample")},
    "replay.recexp": "run.replay_recexp",
    "replay.priosignal": "run.replay_priosignal",
    "wrapper.length": "run.episode_limit",  # :77
    "run.driver_parallel": "run.driver_parallel",  # :73; host envs only, ours False
    **_suite("atari"), **_suite("atari100k"), **_suite("crafter"), **_suite("dmc"),  # :79-84
    **_suite("loconav"),  # :86
    **_suite("procgen"),  # :83
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
    "run.from_checkpoint": "run.from_checkpoint",  # :63; a new run from another's agent
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
    "run.checkpoint_keep": "run.checkpoint_keep",
    "run.report_every_logs": "run.report_every",
    "run.video_every_logs": "run.video_every",
    "run.replay_capacity": "run.replay_capacity",
    "run.seed_loop": "run.seed_loop",
    "run.replay_memory": "run.replay_memory",
    # Read by the reference's train loop (embodied/run/train.py:89 @e3f0224), which has
    # no such key in its configs.yaml.
    "run.from_checkpoint_regex": "run.from_checkpoint_regex",
    # Training from a replay directory (data/replay_dir.py, docs/replay.md).
    "run.replay_from": "run.replay_from",
    "run.offline": "run.offline",
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
    # ProcGen's resize filter (the constructor's argument at 29eb964, procgen.py:8); which
    # keys Memory Maze observes: the reference's ExtraObs (29eb964) or image (e3f0224).
    **_suite("procgen", own=True), **_suite("memmaze"),
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
MAY_BE_EMPTY = frozenset({"logger.wandb.project", "logger.wandb.entity", "logger.mlflow.uri",
                          "run.from_checkpoint", "run.from_checkpoint_regex",
                          "run.replay_from"})

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

# Reference suites (and their presets of the same name) that cannot run here, with why.
REFUSED_SUITES: dict[str, str] = {
    "minecraft": "the minecraft suite needs MineRL, which has no installable release",
    "dmlab": ("the dmlab suite needs DeepMind Lab, a native build of its own "
              "(docs/environments.md)"),
}

# Keys (or key prefixes) with no meaning here -> why.
REFUSED: dict[str, str] = {
    "seed": "seeds are given as a list: --seeds 0 1 2 (trained side by side)",
    "method": _LOGGER,
    "logdir": "the run directory is --out",
    "eval_dir": "train_holdout is not implemented",
    "filter": "the terminal line's filter is logger.filter (the reference's HEAD name)",
    "tensorboard_videos": _LOGGER,
    "logger.timer": "timers are not reported",
    "logger.fps": ("episode videos (`dreamerjax eval --video`, run.video_every_logs) are "
                   "written at 30 frames per second"),
    "logger.user": "expa, the reference's internal logger, is not implemented",
    "replay.save_wait": ("the replay's chunk files are written at each log point and "
                         "checkpoint, and waited for (run/replay_files.py)"),
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
    "run.log_keys_video": ("videos are of evaluation episodes, every run.video_every_logs "
                           "log points (0: never)"),
    "run.eval_initial": "evaluation runs at every log point, after its chunk",
    "run.eval_fill": "there is no evaluation replay",
    **{f"run.{k}": _LOGGER
       for k in ("log_zeros", "log_keys_sum", "log_keys_avg",
                 "log_keys_max", "log_video_fps", "log_video_streams",
                 "log_episode_timeout", "usage", "timer")},
    **{f"run.{k}": _DRIVER
       for k in ("actor_addr", "replay_addr", "logger_addr", "actor_batch",
                 "actor_threads", "env_replica", "ipv6",
                 "agent_process", "remote_replay")},
    **{f"env.{s}": reason for s, reason in REFUSED_SUITES.items()},
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
# Words a key takes in place of a number: {key: {word: value}}.
KEY_WORDS: dict[str, dict[str, Any]] = {"run.checkpoint_keep": {"all": 0}}

RESUMABLE_FIELDS = frozenset({"run.steps", "run.checkpoint_every", "run.checkpoint_keep",
                              "run.driver_parallel", "run.report_every", "run.video_every",
                              "run.replay_memory", "logger.outputs"})


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
    "video_every": "run.video_every_logs",
    "driver_parallel": "run.driver_parallel",
    "replay_from": "run.replay_from",
    "offline": "run.offline",
    "twohot_mean": "twohot_mean",
    "reference": "reference",
    "cnn_mults": r"(enc|dec)\.simple\.mults",
    "cnn_minres": r"(enc|dec)\.simple\.minres",
    "data_devices": "jax.train_devices",
}

# CLI fields whose value is spelled otherwise than their key's: field -> the key's value.
# A directory may come as a path object (the command line's Path, a caller's pathlib.Path);
# the key holds its text, as config.json stores it.
FLAG_VALUES = {"data_devices": lambda n: list(range(n)) if n > 0 else [n],
               "replay_from": lambda p: os.fspath(p) if isinstance(p, os.PathLike) else p}


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
    # :253-258 (without its logger key)
    "loconav": {"task": "loconav_ant_maze_m", "env.loconav.repeat": 1,
                "run.train_ratio": 256},
    # :201-209
    "procgen": {"task": "procgen_coinrun", "env.procgen.size": [96, 96],
                r"(enc|dec).simple.minres": 6, "run.steps": 1.1e8, "run.train_ratio": 64,
                "enc.spaces": "image", "dec.spaces": "image"},
    # :247-251 without run.save_every (seconds of wall clock there).
    "bsuite": {"task": "bsuite_mnist/0", "run.num_envs": 1, "run.train_ratio": 1024},
    # :260-263
    "memmaze": {"task": "memmaze_11x11", "enc.spaces": "image", "dec.spaces": "image"},
    # :275-288 without the jax, wrapper.checks, report and seconds-of-wall-clock keys.
    "debug": {"wrapper.length": 100, "run.num_envs": 4, "run.train_ratio": 8,
              "run.driver_parallel": False,
              "batch_size": 4, "batch_length": 12, "replay.size": 1e4,
              r"(rewhead|critic).bins": 9,
              "dyn.rssm.deter": 12, "dyn.rssm.hidden": 8, "dyn.rssm.stoch": 4,
              "dyn.rssm.classes": 4, "dyn.rssm.blocks": 4,
              r".*\.layers": 2, r".*\.units": 8, r".*\.depth": 2},
}


# Named configs of the reference that set nothing here -> why, and what does (both versions).
REFUSED_NAMED: dict[str, str] = {
    "multicpu": ("the reference's 8 logical CPUs split into policy and train devices "
                 "(configs.yaml:265-273); here the policy acts on the train devices: "
                 "start with XLA_FLAGS=--xla_force_host_platform_device_count=N and give "
                 "--data-devices N (docs/scaling.md, 'Trying it on a CPU')"),
}

__all__ = [
    "FIXED", "FLAG_KEYS", "FLAG_VALUES", "IS_PATTERN", "KEYS", "MAY_BE_EMPTY", "NAMED",
    "OUR_KEYS", "REFERENCE_KEYS", "REFUSED", "RESUMABLE_FIELDS", "RETIRED_KEYS",
    "UNKEYED_FIELDS", "ConfigError", "NotResumable", "cli_spelling", "fix_pairs", "fix_text",
    "python_spelling", "steps_may_grow", "_without_retired",
]
