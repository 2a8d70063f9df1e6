"""The one check of a run's values (`validate`), before anything compiles: each error is
one line naming the key. run/plan.make_plan calls it once per run (the command line's,
dreamerjax.train's, the benchmarks'); make_config and the other resolving functions call it
on the configs they return. The checks against an env's spaces follow in run/setup.py.
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from dreamerjax.config import versions
from dreamerjax.config.defaults import (
    COMPUTE_DTYPES,
    HEAD_REF,
    LOGGER_OUTPUTS,
    REFERENCES,
    REFUSED_COMPUTE_DTYPES,
    REPLAY_MEMORIES,
    SEED_LOOPS,
    TWOHOT_MEANS,
    Config,
    check_agent_options,
    mesh_shape,
    replay_rows_per_env,
)
from dreamerjax.config.dotted import coerce, field_type, same_fixed, to_dotted, type_name
from dreamerjax.config.keys import (
    KEYS,
    MAY_BE_EMPTY,
    MAY_BE_INFINITE,
    ConfigError,
)

# ---------------------------------------------------------------------------------------
# Checks (before anything compiles); each names the key. validate is the one check of a
# run's values: a run's plan (run/plan.make_plan) calls it once, for the command line,
# dreamerjax.train and the benchmarks alike.


_POSITIVE = (
    "run.steps", "run.num_envs", "run.eval_eps", "run.eval_every_rows", "replay.size",
    "replay.chunksize",
    "batch_size", "imag_length", "horizon", "dyn.rssm.deter", "dyn.rssm.hidden",
    "dyn.rssm.stoch", "dyn.rssm.classes", "dyn.rssm.blocks", "dyn.rssm.imglayers",
    "dyn.rssm.obslayers", "dyn.rssm.dynlayers", "enc.simple.depth", "enc.simple.units",
    "enc.simple.kernel", "enc.simple.minres", "dec.simple.depth", "dec.simple.units",
    "dec.simple.kernel", "dec.simple.minres", "dec.simple.block_space", "rewhead.units",
    "conhead.units", "actor.units", "critic.units", "slow_critic_update",
)
_NON_NEGATIVE = (
    "run.train_fill", "run.replay_capacity", "run.checkpoint_every", "run.checkpoint_keep",
    "run.report_every_logs", "run.video_every_logs", "wrapper.length",
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
                     "run.checkpoint_keep",
                     "run.report_every_logs", "run.video_every_logs"), INT32_MAX),
    **dict.fromkeys(("run.num_envs", "run.eval_eps", "run.train_ratio"), 2**20),
    **dict.fromkeys(("enc.simple.minres", "dec.simple.minres"), 2**12),
}
_MULTS_AT_MOST = 2**10


def validate(config: Config, *, seeds: Sequence[int] | None = None) -> None:
    """Raise ConfigError (one line, naming the key) for a config that cannot run, and for
    seeds (when given) that cannot share one run. The checks against the env's spaces
    (the CNN geometry of its image keys) follow in run/setup.make_setup, which the plan
    calls after this one."""
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
        typ, value = field_type(path), flat[key]
        coerce(key, value, typ)
        inner = typing.get_args(typ)[0] if typing.get_origin(typ) is tuple else typ
        items = value if typing.get_origin(typ) is tuple else (value,)
        if inner is int and any(not isinstance(v, int) for v in items):
            raise ConfigError(f"{key}: expects {type_name(typ)}, got {value!r}")


def _check_log_points(flat: dict[str, Any]) -> None:
    """Log points fall on whole ticks (every env steps once a tick) and end the run."""
    steps, every, envs = flat["run.steps"], flat["run.eval_every_rows"], flat["run.num_envs"]
    if every % envs:
        raise ConfigError(f"run.eval_every_rows: {every} must be a multiple of run.num_envs "
                          f"({envs}): a log point comes after a whole tick of every env",
                          fix=_log_point_fixes(flat))
    if steps % every:
        raise ConfigError(f"run.eval_every_rows: {every} must divide run.steps ({steps}) so "
                          "the run ends on a log point", fix=_log_point_fixes(flat))


# ---------------------------------------------------------------------------------------
# Fixes: what a refusal suggests satisfies every rule that involves the keys it changes
# (the log points, the replay that one sequence needs, the data devices' split), so that
# the suggestion is never itself refused (tests/test_config.py tries each).


def _divisors(n: int) -> list[int]:
    """The positive divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _nearest(values: Sequence[int], target: int) -> int | None:
    """The value closest to target (the smaller of two as close), None if none."""
    return min(values, key=lambda v: (abs(v - target), v)) if values else None


def _replay_fits(flat: Mapping[str, Any], steps: int, envs: int) -> bool:
    """Whether each env's replay ring holds one training sequence (batch_length rows)
    for a run of `steps` rows over `envs` envs (replay_rows_per_env's rule)."""
    if flat["run.replay_capacity"] > 0:
        return flat["run.replay_capacity"] >= flat["batch_length"]
    return -(-min(flat["replay.size"], steps) // envs) >= flat["batch_length"]


def _log_every_fit(steps: int, every: int, envs: int) -> int | None:
    """The log interval closest to `every` that is a multiple of envs and divides steps."""
    if steps % envs:
        return None
    return _nearest([envs * d for d in _divisors(steps // envs)], every)


def _steps_fit(flat: Mapping[str, Any], steps: int, every: int, envs: int) -> int | None:
    """The shortest run of at least `steps` rows made of whole log intervals of `every`
    rows whose replay holds a training sequence; None if the replay never does."""
    if not _replay_fits(flat, max(flat["replay.size"], steps), envs):
        return None  # the replay's capacity or replay.size itself is too small
    need = steps if flat["run.replay_capacity"] else max(
        steps, (flat["batch_length"] - 1) * envs + 1)
    fit = -(-need // every) * every
    return fit if fit <= INT32_MAX else None


def _log_point_fixes(flat: Mapping[str, Any]) -> list:
    """The log interval closest to the one asked that fits the run as it is; or, for an
    interval of whole ticks, the run's length made whole intervals; else both changed
    (the interval made whole ticks, the run whole intervals)."""
    steps, every, envs = flat["run.steps"], flat["run.eval_every_rows"], flat["run.num_envs"]
    fixes: list = []
    fit = _log_every_fit(steps, every, envs)
    if fit is not None and _replay_fits(flat, steps, envs):
        fixes.append(("run.eval_every_rows", fit))
    ticks = every if every % envs == 0 else max(envs, round(every / envs) * envs)
    longer = _steps_fit(flat, steps, ticks, envs)
    if longer is not None and ticks == every:
        fixes.append(("run.steps", longer))
    elif longer is not None and not fixes:
        fixes.append((("run.eval_every_rows", ticks), ("run.steps", longer)))
    return fixes


def _num_envs_fit(flat: Mapping[str, Any], devices: int) -> int | None:
    """The env count closest to run.num_envs that splits over `devices` data devices, is
    a whole tick of the log interval and leaves each env's replay a training sequence."""
    steps, every = flat["run.steps"], flat["run.eval_every_rows"]
    fits = [m for m in _divisors(every) if m % devices == 0 and steps % m == 0
            and m <= _AT_MOST["run.num_envs"] and _replay_fits(flat, steps, m)]
    return _nearest(fits, flat["run.num_envs"])


def _check_train_devices(flat: dict[str, Any], config: Config) -> None:
    """The data-parallel devices of a seed: numbered 0 ... N-1, splitting its envs and its
    batch evenly; HEAD's mesh shape fits them and has no tensor axis."""
    devices = list(flat["jax.train_devices"])
    n = len(devices)
    if devices != list(range(n)):
        raise ConfigError(f"jax.train_devices: expects the devices 0 ... N-1 of a seed's "
                          f"group (as --data-devices N sets), got {devices}")
    # The reference's env count and batch do not depend on its train devices; here each
    # data device steps its own envs and samples its share of the batch from their replay
    # rows (docs/deviations.md D19), so both split evenly.
    why = {"run.num_envs": "each data device steps its own envs and keeps their replay rows",
           "batch_size": f"each data device samples batch_size / {n} sequences from its own "
                         "envs' replay rows"}
    # batch_size enters no other rule; the env count enters the log points' and the
    # replay's. A fix of the first refused makes the other split too.
    fits = {"run.num_envs": _num_envs_fit(flat, n), "batch_size": -(-flat["batch_size"] // n) * n}
    unsplit = [key for key in why if flat[key] % n]
    if unsplit:
        key = unsplit[0]
        fix = tuple((k, fits[k]) for k in unsplit)
        raise ConfigError(f"{key}: {flat[key]} cannot be split over the {n} data devices "
                          f"(jax.train_devices, --data-devices {n}): {why[key]}",
                          fix=[] if fits[key] is None else [fix if len(fix) > 1 else fix[0]])
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
        if field_type(path) is str and not value.strip() and key not in MAY_BE_EMPTY:
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
        run = config.run
        if run.replay_capacity:
            source, fix = "run.replay_capacity", [("run.replay_capacity", length)]
        else:
            source = "min(replay.size, run.steps) / run.num_envs"
            size = length * run.num_envs  # rows of the whole run that fill one sequence
            longer = _steps_fit({**flat, "replay.size": max(size, run.replay_size)},
                                run.steps, run.eval_every, run.num_envs)
            if run.replay_size >= size:
                fix = [("run.steps", longer)]
            elif run.steps == longer:
                fix = [("replay.size", size)]
            else:
                fix = [(("replay.size", size), ("run.steps", longer))]
        raise ConfigError(f"batch_length: {length} rows are longer than the replay "
                          f"({rows} rows per env = {source})", fix=fix)
    for key in ("enc.simple.mults", "dec.simple.mults"):
        if not flat[key] or any(m <= 0 for m in flat[key]):
            raise ConfigError(f"{key}: needs one or more positive multipliers, got "
                              f"{list(flat[key])}")
        if max(flat[key]) > _MULTS_AT_MOST:
            raise ConfigError(f"{key}: at most {_MULTS_AT_MOST} per stage, got "
                              f"{list(flat[key])}")


def _check_env_sections(flat: dict[str, Any]) -> None:
    """The suites' image sizes and action repeats, the encoder/decoder space regexes."""
    for suite in ("atari", "atari100k", "crafter", "dmc", "procgen", "craftax", "loconav"):
        key = f"env.{suite}.size"
        if len(flat[key]) != 2 or any(n <= 0 for n in flat[key]):
            raise ConfigError(f"{key}: needs two positive sizes, got {list(flat[key])}")
    for suite in ("playground", "brax", "loconav"):
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
    if flat["run.replay_memory"] not in REPLAY_MEMORIES:
        raise ConfigError(f"run.replay_memory: {flat['run.replay_memory']!r}; choose one of "
                          f"{', '.join(REPLAY_MEMORIES)}")
    if flat["reference"] not in REFERENCES:
        raise ConfigError(f"reference: {flat['reference']!r}; choose one of "
                          f"{', '.join(REFERENCES)}")
    if flat["twohot_mean"] not in TWOHOT_MEANS:
        raise ConfigError(f"twohot_mean: {flat['twohot_mean']!r}; choose one of "
                          f"{', '.join(TWOHOT_MEANS)}")
    _validate_logger(flat)
    _check_replay_selectors(flat)
    if flat["run.offline"] and not flat["run.replay_from"]:
        raise ConfigError("run.offline: an offline run trains on a replay directory's rows",
                          fix=(("run.replay_from", "DIR"),))


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
        if not same_fixed(flat[key], want):
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
