"""Printing a config: `describe` (dreamerjax info: every key with its value and the layer
that set it) and `markdown_tables` (the key tables of docs/config.md).
"""

from __future__ import annotations

import json
from typing import Any

from dreamerjax.config import versions
from dreamerjax.config.defaults import (
    HEAD_REF,
    Config,
)
from dreamerjax.config.dotted import field_type, to_dotted, type_name
from dreamerjax.config.keys import (
    FIXED,
    KEY_WORDS,
    KEYS,
    OUR_KEYS,
    REFERENCE_KEYS,
    REFUSED,
)
from dreamerjax.config.resolve import Provenance, version_keys

# ---------------------------------------------------------------------------------------
# Printing (dreamerjax info)


def shown_value(key: str, value: Any) -> str:
    """A key's value as a user gives it: a value with a word of its own by the word
    (run.checkpoint_keep 0 is `all`), else as JSON."""
    word = next((w for w, v in KEY_WORDS.get(key, {}).items() if v == value), None)
    return word or json.dumps(list(value) if isinstance(value, tuple) else value)


def type_shown(key: str) -> str:
    """A key's type as docs/config.md names it, with its words (`int or all`)."""
    words = " or ".join(f"`{w}`" for w in KEY_WORDS.get(key, {}))
    typ = type_name(field_type(KEYS[key]))
    return f"{typ} or {words}" if words else typ


def describe(config: Config, provenance: Provenance) -> str:
    """The precedence, the layers applied and every key with its value and origin."""
    flat = to_dotted(config)
    reference = config.agent.reference
    lines = ["Precedence: defaults < --config FILE < --configs (left to right) "
             "< --set (in order) < explicit flags",
             "Layers applied: " + " < ".join(provenance.layers),
             f"Reference: danijar/dreamerv3 at {reference} (keys in its spelling)",
             f"Size: {config.size}", "Resolved config (key: value  [origin]):"]
    table, _ = version_keys(reference)
    shown_keys = {k: targets[0] for k, targets in table.items()}
    width = max(len(k) for k in shown_keys)
    for key in sorted(shown_keys):
        value = flat[shown_keys[key]]
        origin_key = shown_keys[key]
        shown = shown_value(origin_key, value)
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
        out.append(f"| `{key}`{own} | `{path}` | {type_shown(key)} | "
                   f"`{shown_value(key, defaults[key])}` |")
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
