"""Resolving a run's config from its layers, with provenance (see keys.py's docstring for
the layers and the key tables): `resolve`, `make_config` (the Python API), `--set` on a
given base (`with_sets`), a resumed run's merge of the flags that may change it
(`resume_merge`), and the reference's `--KEY VALUE` flag form.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamerjax.config import versions
from dreamerjax.config.defaults import (
    HEAD_REF,
    REFERENCES,
    AgentConfig,
    Config,
    RunConfig,
    mesh_shape,
)
from dreamerjax.config.dotted import (
    coerce,
    field_type,
    flatten,
    from_dotted,
    load_file,
    parse_scalar,
    same_fixed,
    to_dotted,
)
from dreamerjax.config.keys import (
    _NOT_CONFIGURABLE,
    FIXED,
    FLAG_KEYS,
    FLAG_VALUES,
    IS_PATTERN,
    KEY_WORDS,
    KEYS,
    NAMED,
    OUR_KEYS,
    REFUSED,
    REFUSED_NAMED,
    REFUSED_SUITES,
    RESUMABLE_FIELDS,
    ConfigError,
    NotResumable,
    _without_retired,
    steps_may_grow,
)
from dreamerjax.config.validate import validate

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


def version_keys(reference: str) -> tuple[dict[str, tuple[str, ...]], dict]:
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
    """The version-spelled keys (of version_keys) a key sets; a key of the other version
    is refused with the reason."""
    table, fixed = version_keys(reference)
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


def _apply(flat: dict, origin: dict, updates: Mapping[str, Any], label: str,
           full: bool, reference: str | None = None) -> None:
    """Set `updates` on the internal dotted `flat`; keys are spelled as `reference` spells
    them (None: the internal, 29eb964 spelling, as the flags are)."""
    table, fixed_keys = version_keys(reference or REFERENCES[0])
    for key, value in updates.items():
        for target in _targets(key, label, full, reference):
            if target in fixed_keys:
                fixed, reason = fixed_keys[target]
                if not same_fixed(value, fixed):
                    why = "" if reason == _NOT_CONFIGURABLE else f" ({reason})"
                    raise ConfigError(f"{label}: {target}={value!r} is not supported: only "
                                      f"{fixed!r} is implemented{why}")
                continue
            if target == "reference" and reference is not None and value != reference:
                raise ConfigError(f"{label}: reference={value!r} after the run chose "
                                  f"{reference!r}: give the version once")
            for internal in table[target]:
                words = KEY_WORDS.get(internal, {})
                if isinstance(value, str) and words:
                    if value not in words:
                        raise ConfigError(f"{label}: {target}: expects an int or "
                                          f"{' / '.join(words)}, got {value!r}")
                    value = words[value]
                try:
                    flat[internal] = coerce(internal, value, field_type(KEYS[internal]))
                except ConfigError as e:  # e names the internal key: the target once
                    named = "" if target == internal else f"{target}: "
                    raise ConfigError(f"{label}: {named}{e}") from None
                origin[internal] = label


def agent_from_reference(flat: Mapping[str, Any], reference: str) -> AgentConfig:
    """The agent config a reference's own full config gives (its dotted keys, spelled as
    `reference` spells them, e.g. a fixture's config dump): every key that sets an agent
    field is applied over that version's defaults; the others (the run, the replay,
    logging, the reference's process layout) cannot change a loss or an update and are
    left out, as are the options of which only one value is implemented (FIXED: the caller
    checks those its use depends on)."""
    table, _ = version_keys(reference)
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
    return key, parse_scalar(text)


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
            run_fields: Mapping[str, Any] | None = None, check: bool = True,
            label_of: Callable[[str], str] | None = None,
            **cli_fields: Any) -> tuple[Config, Provenance]:
    """The run's Config from the layers (module docstring), validated unless check=False
    (the command line's train leaves it to the run's plan, run/plan.make_plan, which
    validates it with the seeds).

    cli_fields are the CLI's explicit flags by field name (FLAG_KEYS, plus `size` and
    `tiny`, which append the named configs size<S> / tiny); None means not given.
    run_fields: RunConfig fields by name, set after the flags (make_config's fields that
    have no flag), so that the config is validated whole. label_of: how an error names a
    cli_field (None: its flag, `--eval-every`; make_config: its keyword, `eval_every`).
    """
    label_of = label_of or (lambda name: f"--{name.replace('_', '-')}")
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
        if name in REFUSED_NAMED:
            raise ConfigError(f"{label}: not available: {REFUSED_NAMED[name]}")
        if name not in table and name in REFUSED_SUITES:
            raise ConfigError(f"{label}: {REFUSED_SUITES[name]}")
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
        label = label_of(name)
        _check_flag_version(FLAG_KEYS[name], label, reference)
        value = FLAG_VALUES.get(name, lambda v: v)(value)
        _apply(flat, origin, {FLAG_KEYS[name]: value}, label, full=True)
        layers.append(label)
    config = from_dotted(flat)
    if run_fields:
        config = dataclasses.replace(config, run=dataclasses.replace(config.run, **run_fields))
    if check:
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


def with_sets(config: Config, sets: Sequence[str], check: bool = True) -> Config:
    """config with `--set KEY=VALUE` items applied in order (resolve's --set layer on a
    given base, e.g. the bench's configuration), validated unless check=False (the bench's
    run plan validates it)."""
    out = from_dotted(_set_dotted(config, sets)[0])
    if check:
        validate(out)
    return out


def resumable_keys() -> tuple[str, ...]:
    """The keys whose field may differ on resume (RESUMABLE_FIELDS)."""
    return tuple(key for key, path in KEYS.items() if path in RESUMABLE_FIELDS)


# Keys that more than one value spells alike: the meaning a run's layout takes from them.
_MEANINGS = {"jax.train_mesh": lambda config: mesh_shape(config.run)}


def _same_meaning(key: str, config: Config, new: Config) -> bool:
    """Whether `key`'s value in `new` means what it does in `config` though spelled
    otherwise (jax.train_mesh '2,1,1' and '-1,1,1' over 2 train devices)."""
    if key not in _MEANINGS or config.run.train_devices != new.run.train_devices:
        return False
    try:
        return _MEANINGS[key](config) == _MEANINGS[key](new)
    except ValueError:
        return False


def with_resumed_sets(config: Config, sets: Sequence[str]) -> Config:
    """A resumed run's config with `--set KEY=VALUE` items applied in order: only keys
    that may change on resume (resumable_keys, e.g. logger.outputs), else ConfigError
    naming the item and the key. Not validated here (the caller validates the whole)."""
    flat = to_dotted(config)
    new, origin = _set_dotted(config, sets)
    for key, value in new.items():
        if value != flat[key] and key not in resumable_keys():
            if _same_meaning(key, config, from_dotted(new)):
                new[key] = flat[key]  # the run's own spelling stays in its config.json
                continue
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
                reference: str | None = None, check: bool = True, **fields: Any) -> Config:
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
    trained rows, the dotted key `batch_length` the context row too). check=False leaves
    the values' check to the run's plan (run/plan.make_plan), which makes it once.
    """
    flags = {name: value for name, value in fields.items() if name in FLAG_KEYS}
    run_fields = {name: value for name, value in fields.items() if name not in FLAG_KEYS}
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(run_fields) - known)
    if unknown:
        raise TypeError(f"make_config() got an unknown field {unknown[0]!r}: give a flag "
                        f"({', '.join(FLAG_KEYS)}) or a RunConfig field")
    config, _ = resolve(configs, sets, size=size, tiny=tiny, env=env, run_fields=run_fields,
                        reference=None if reference is None else str(reference),
                        check=check, label_of=str, **flags)
    return config



# ---------------------------------------------------------------------------------------
# Resuming: what may change, and the merge of a resumed run's flags into its config


def resume_may_change() -> tuple[str, ...]:
    """The flags (FLAG_KEYS' field names) whose config field may change on resume
    (RESUMABLE_FIELDS)."""
    return tuple(flag for flag, key in FLAG_KEYS.items() if KEYS.get(key) in RESUMABLE_FIELDS)


def resume_may_set() -> tuple[str, ...]:
    """The keys --set (or --KEY) may change on resume that no flag of their own sets."""
    flagged = set(FLAG_KEYS.values())
    return tuple(k for k in resumable_keys() if k not in flagged)


def resumable_flags() -> tuple[str, ...]:
    """The command line's flags that may differ from a resumed run's config: those of
    resume_may_change() and, as --KEY (the same as --set KEY=...), resume_may_set()'s
    (docs/getting-started.md, "Resume", lists them)."""
    return (*("--" + f.replace("_", "-") for f in resume_may_change()),
            *("--" + k for k in resume_may_set()))


def _saved_flags(config: Config, seeds: Sequence[int]) -> dict[str, Any]:
    """A run's value of every run-defining flag, from its config."""
    saved = {"size": config.size, "seeds": tuple(seeds), "tiny": config.size == "tiny",
             "cnn_mults": tuple(config.agent.enc.mults), "cnn_minres": config.agent.enc.minres}
    for flag, key in FLAG_KEYS.items():
        if key in KEYS:  # a plain key (the CNN flags set a regex of keys)
            saved[flag] = functools.reduce(getattr, KEYS[key].split("."), config)
    return saved


def _flag_changes(config: Config, saved: Mapping[str, Any], name: str, value: Any) -> bool:
    """Whether the flag `name` given as `value` on --resume means another run than
    `config`'s: a FLAG_KEYS flag by the keys it sets, resolved as a new run resolves them
    (FLAG_VALUES and the key's type: --data-devices 2 is jax.train_devices (0, 1), as the
    run saved it); size, tiny, seeds and the version by their value."""
    if name not in FLAG_KEYS or name == "reference":
        return (tuple(value) if isinstance(value, tuple | list) else value) != saved[name]
    label = "--" + name.replace("_", "-")
    _check_flag_version(FLAG_KEYS[name], label, config.agent.reference)
    flat = to_dotted(config)
    new = dict(flat)
    _apply(new, {}, {FLAG_KEYS[name]: FLAG_VALUES.get(name, lambda v: v)(value)}, label,
           full=True)
    return new != flat


def resume_merge(config: Config, seeds: Sequence[int], given: Mapping[str, Any],
                 sets: Sequence[str] = ()) -> Config:
    """A resumed run's config: the run's `config` with the flags given on the command line
    (`given`: run-defining flags by field name, FLAG_KEYS' and size, seeds, tiny) that may
    change on resume applied, then the `--set KEY=VALUE` items of resumable keys.
    ConfigError naming the first flag that conflicts with the run (NotResumable naming a
    --set key that cannot change). Not validated here: the run's plan validates it."""
    saved = _saved_flags(config, seeds)
    may_change = resume_may_change()
    for name, value in given.items():
        if name in may_change or not _flag_changes(config, saved, name, value):
            continue
        flag, key = "--" + name.replace("_", "-"), FLAG_KEYS.get(name)
        what = f"{key} " if key in KEYS else ""
        value = os.fspath(value) if isinstance(value, os.PathLike) else value
        raise ConfigError(f"{flag} {value!r} conflicts with the run's {what}{saved[name]!r}; "
                          "it cannot change on --resume (start a new run with --out)")
    run = dataclasses.replace(
        config.run, **{k: v for k, v in given.items() if k in may_change})
    resumed = with_resumed_sets(dataclasses.replace(config, run=run), sets)
    why = steps_may_grow(config.run.steps, resumed.run.steps)
    if why:
        by_flag = given.get("steps") == resumed.run.steps
        label = f"--steps {given['steps']}" if by_flag else f"run.steps {resumed.run.steps}"
        raise ConfigError(f"{label}: {why}")
    return resumed
