"""A config's dotted form: every key of the tables (keys.py) with its value, as the
reference spells it; read from and written to YAML and JSON files (`--config`, config.json,
an exported policy), each value coerced to its field's type as the reference's rules say.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dreamerjax.config.defaults import (
    SIZES,
    AgentConfig,
    Config,
    agent_config,
    from_dict,
    tiny_agent_config,
)
from dreamerjax.config.keys import (
    IS_PATTERN,
    KEYS,
    ConfigError,
    _without_retired,
)

RUN_FILE_KEYS = ("seeds", "env_modules", "env_registered_in_script")
"""The keys of a run's config.json beside the config's sections: its seeds, the modules
that registered its env, and whether a script or notebook did (run/records.py writes and
reads them)."""

# ---------------------------------------------------------------------------------------
# Field types


@functools.cache  # validate asks for every key's, and every entry of a run validates
def field_type(path: str) -> Any:
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


def type_name(typ: Any) -> str:
    origin = typing.get_origin(typ)
    if origin is tuple:
        args = typing.get_args(typ)
        inner = args[0].__name__
        return f"list of {inner}" if args[-1] is Ellipsis else f"list of {len(args)} {inner}"
    return typ.__name__


def coerce(key: str, value: Any, typ: Any) -> Any:
    """value as typ (the reference's rules: an integral float is an int, an int is a float;
    a list may be a comma-separated string), else ConfigError naming the key."""
    def bad() -> ConfigError:
        return ConfigError(f"{key}: expects {type_name(typ)}, got {value!r}")

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
            items = [parse_scalar(x.strip()) for x in items]
        try:
            return tuple(coerce(key, x, args[0]) for x in items)
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
        # config.json spells an infinite value (replay.prio.initial's default) as text.
        if isinstance(value, str) and value.lower().lstrip("+-.") == "inf":
            return float(value.replace(".", ""))
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


def parse_scalar(text: str) -> Any:
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

    A run's own config.json (our field form: `agent`, `run`, ... sections, plus
    RUN_FILE_KEYS) is read as the Config it holds; its seeds are not applied (give
    --seeds).
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
        fields = {k: v for k, v in data.items() if k not in RUN_FILE_KEYS}
        try:
            return to_dotted(from_dict(fields))
        except TypeError as e:
            raise ConfigError(f"--config {path}: not a dreamerjax config ({e})") from None
    return _without_retired(flatten(data))


def _is_field_form(data: Mapping) -> bool:
    return isinstance(data.get("agent"), Mapping) and isinstance(data.get("run"), Mapping) \
        and "rssm" in data["agent"]



def same_fixed(value: Any, fixed: Any) -> bool:
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
