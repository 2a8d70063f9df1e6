"""What README.md and docs/*.md name exists: every `dreamerjax.x.y` module or attribute
imports, every benchmarks/ script is there, every `dreamerjax <command> --flag` is a flag
of that command's parser, every relative link resolves, docs/README.md lists every page,
and the flags a resume may change are the code's and the docs'. Reads text and imports
modules; compiles nothing."""

from __future__ import annotations

import dataclasses
import importlib
import re
import typing
from pathlib import Path

import pytest

from dreamerjax.config import keys
from dreamerjax.tools import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXT = {page.relative_to(ROOT).as_posix(): page.read_text() for page in PAGES}


def _mentions(pattern: str, group: int = 0) -> list[tuple[str, str]]:
    """(page, match) for every match of pattern in every page, each pair once."""
    found = {(page, m.group(group)) for page, text in TEXT.items()
             for m in re.finditer(pattern, text)}
    return sorted(found)


# --- dreamerjax.x.y ----------------------------------------------------------------------

DOTTED = _mentions(r"(?<![\w.])dreamerjax(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _resolve(name: str):
    """The object a dotted name means: the longest importable module prefix, then
    attributes. A module whose optional package is missing (a suite's extra) is skipped."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as e:
            if e.name and not e.name.startswith("dreamerjax"):
                pytest.skip(f"{name}: needs {e.name} (an optional extra)")
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


@pytest.mark.parametrize("page,name", DOTTED, ids=[f"{p}:{n}" for p, n in DOTTED])
def test_named_modules_and_attributes_exist(page, name):
    try:
        _resolve(name)
    except (ModuleNotFoundError, AttributeError) as e:
        pytest.fail(f"{page} names {name}, which does not exist ({e})")


# --- benchmarks/ scripts ---------------------------------------------------------------

SCRIPTS = _mentions(r"\bbenchmarks/[\w./-]+\.(?:py|sh)\b")


def test_docs_name_benchmark_scripts():
    assert any("python benchmarks/" in text for text in TEXT.values())


@pytest.mark.parametrize("page,path", SCRIPTS, ids=[f"{p}:{s}" for p, s in SCRIPTS])
def test_named_benchmark_scripts_exist(page, path):
    assert (ROOT / path).is_file(), f"{page} names {path}, which does not exist"


# --- dreamerjax <command> --flag -------------------------------------------------------

def _commands() -> dict[str, type]:
    """Subcommand name -> its argument dataclass, from cli.Command."""
    out = {}
    for member in typing.get_args(cli.Command):
        cls, *meta = typing.get_args(member)
        name = next(m.name for m in meta if hasattr(m, "name"))
        out[name] = cls
    return out


COMMANDS = _commands()
_LINE = re.compile(r"\bdreamerjax (" + "|".join(COMMANDS) + r")(?=[ \n`])((?:[^\n`#]|\\\n)*)")


def _flag_uses() -> list[tuple[str, str, str]]:
    """(page, command, flag) for every --flag after `dreamerjax <command>` (to the end of
    the line, a backslash continuing it, or the end of an inline code span)."""
    uses = set()
    for page, text in TEXT.items():
        for m in _LINE.finditer(text):
            tokens = m.group(2).replace("\\\n", " ").split()
            for i, token in enumerate(tokens):
                if token.startswith("--") and (i == 0 or tokens[i - 1] != "--set"):
                    uses.add((page, m.group(1), token.split("=", 1)[0]))
    return sorted(uses)


FLAG_USES = _flag_uses()


def _accepted(command: str, flag: str) -> bool:
    cls = COMMANDS[command]
    own = {"--" + f.name.replace("_", "-") for f in dataclasses.fields(cls)} | {"--help"}
    if flag in own:
        return True
    name = flag[2:]  # the reference's flag form, read as --set (train, info, bench)
    return command in ("train", "info", "bench") and (
        name in keys.KEYS or bool(keys.IS_PATTERN.match(name)))


def test_docs_name_command_flags():
    assert {c for _, c, _ in FLAG_USES} >= {"train", "eval", "bench", "summary"}


@pytest.mark.parametrize("page,command,flag", FLAG_USES,
                         ids=[f"{p}:{c}:{f}" for p, c, f in FLAG_USES])
def test_named_flags_are_accepted_by_their_command(page, command, flag):
    assert _accepted(command, flag), f"{page}: `dreamerjax {command}` has no {flag}"


# --- links and the index ---------------------------------------------------------------

LINKS = _mentions(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", group=1)


@pytest.mark.parametrize("page,target", [(p, t) for p, t in LINKS if "://" not in t],
                         ids=[f"{p}:{t}" for p, t in LINKS if "://" not in t])
def test_relative_links_resolve(page, target):
    assert ((ROOT / page).parent / target).exists(), f"{page} links to missing {target}"


def test_docs_index_lists_every_page():
    index = TEXT["docs/README.md"]
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    missing = [p for p in pages if f"]({p})" not in index]
    assert not missing, f"docs/README.md does not list {missing}"


# --- the flags a resume may change -----------------------------------------------------

def test_resumable_flags_are_the_codes_and_the_docs():
    from dreamerjax.config import resolve as config_resolve

    flags = config_resolve.resumable_flags()
    from_code = {"--" + name.replace("_", "-") for name in config_resolve.resume_may_change()}
    from_code |= {"--" + key for key in config_resolve.resume_may_set()}  # --KEY: --set KEY=
    assert set(flags) == from_code
    text = TEXT["docs/getting-started.md"]
    section = text[text.index("## Resume"):].split("\n## ", 1)[0]
    for flag in flags:
        assert f"`{flag}`" in section, f"docs/getting-started.md, Resume: {flag} missing"
    listed = set(re.findall(r"`(--[a-z.-]+)`", section.split("may change are", 1)[1]
                            .split("(", 1)[0]))
    assert listed == set(flags), listed
