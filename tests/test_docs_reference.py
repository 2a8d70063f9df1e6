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
# The records' and the benchmarks' READMEs: their commands are copied too, so their flags
# are checked as well (links and module names stay the docs' checks).
RECORD_PAGES = [*sorted((ROOT / "results").glob("**/README.md")),
                *sorted((ROOT / "benchmarks").glob("**/README.md"))]
RECORD_TEXT = {page.relative_to(ROOT).as_posix(): page.read_text() for page in RECORD_PAGES}


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
_LINE = re.compile(r"\bdreamerjax (" + "|".join(COMMANDS) + r")(?=[ \n`])((?:\\\n|[^\n`#])*)")


def _flag_uses() -> list[tuple[str, str, str]]:
    """(page, command, flag) for every --flag after `dreamerjax <command>` (to the end of
    the line, a backslash continuing it, or the end of an inline code span)."""
    uses = set()
    for page, text in {**TEXT, **RECORD_TEXT}.items():
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
    own |= set(cli.GLOBAL_FLAGS)  # read by cli.main before parsing, for every command
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
    listed = set(re.findall(r"`(--[a-z._-]+)`", section.split("may change are", 1)[1]
                            .split("(", 1)[0]))
    assert listed == set(flags), listed


# --- words about how the project was made ----------------------------------------------

# Phrases that speak of how the repository was made (its rounds, its machines, the people
# working on it) rather than of a run: the package, docs, records and benchmarks describe
# runs (command, commit, machine model, wall time, what it shows). tests/ is not searched.
MAKING_PHRASES = ("round-1", "earlier port", "reclaimed", "SIGSTOP", "the project's machine",
                  "other engineers", "others edit", "last landed", "this project's CPU",
                  "before, ours", "change of machine", "development machine")
_TEXT_SUFFIXES = {".py", ".md", ".json", ".jsonl", ".txt", ".sh", ".toml", ".cff", ".cfg",
                  ".yaml", ".yml", ""}
_SKIP_DIRS = {".git", "tests", ".venv", "runs", "build", "dist", "__pycache__",
              ".pytest_cache", ".ruff_cache"}


def _repository_text_files():
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if (rel.parts and (rel.parts[0] in _SKIP_DIRS or any(
                p in _SKIP_DIRS or p.endswith(".egg-info") for p in rel.parts))):
            continue
        if path.is_file() and path.suffix in _TEXT_SUFFIXES:
            yield rel.as_posix(), path


def test_no_words_about_how_the_project_was_made():
    pattern = re.compile("|".join(re.escape(p) for p in MAKING_PHRASES), re.IGNORECASE)
    found = []
    for rel, path in _repository_text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = pattern.search(line)
            if m:
                found.append(f"{rel}:{n}: {m.group(0)!r}")
    assert not found, "\n".join(found)


def test_making_phrases_are_found_where_they_appear():
    """The search is not vacuous: each phrase matches a line written with it."""
    pattern = re.compile("|".join(re.escape(p) for p in MAKING_PHRASES), re.IGNORECASE)
    for phrase in MAKING_PHRASES:
        assert pattern.search(f"a line with {phrase.upper()} in it"), phrase
    assert any(rel == "README.md" for rel, _ in _repository_text_files())
    assert any(rel.startswith("results/") for rel, _ in _repository_text_files())


# --- paths, snippets and commands that are copied --------------------------------------

_PLACEHOLDERS = {"tests/test_x.py"}  # a stand-in for any module, not a path
PATHS = sorted({(page, m.group(1).rstrip(".,;:)")) for page, text in TEXT.items()
                for m in re.finditer(r"(?<![\w./-])((?:docs|results|benchmarks|examples|tests)"
                                     r"/[\w./-]+)(?![\w*])", text)} - {(p, x) for p in TEXT
                                                              for x in _PLACEHOLDERS})


@pytest.mark.parametrize("page,path", PATHS, ids=[f"{p}:{x}" for p, x in PATHS])
def test_named_repository_paths_exist(page, path):
    assert (ROOT / path).exists(), f"{page} names {path}, which does not exist"


def test_missing_path_is_reported():
    """The path search finds a path written in prose (as docs/results.md once was)."""
    assert ("docs/deviations.md", "results/cartpole_protocol_pairsum/README.md") in PATHS


PYTHON_BLOCKS = [(page, m.group(1)) for page, text in TEXT.items()
                 for m in re.finditer(r"```python\n(.*?)```", text, re.DOTALL)]


@pytest.mark.parametrize("page,code", PYTHON_BLOCKS,
                         ids=[f"{p}:{i}" for i, (p, _) in enumerate(PYTHON_BLOCKS)])
def test_python_snippets_compile_and_use_public_names(page, code):
    tree = compile(code, page, "exec", flags=0x400, dont_inherit=True)  # ast.PyCF_ONLY_AST
    import ast
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "dreamerjax":
            assert node.attr in dir(importlib.import_module("dreamerjax")), \
                f"{page}: dreamerjax.{node.attr} is not a public name"


def test_tiny_training_commands_bound_their_rows():
    """A copied `--tiny` command names --steps: the default is the protocol's 20,000 rows."""
    unbounded = [(page, m.group(0)) for page, text in TEXT.items()
                 for m in _LINE.finditer(text)
                 if m.group(1) == "train" and "--tiny" in m.group(2)
                 and "--steps" not in m.group(2) and "--resume" not in m.group(2)]
    assert not unbounded, unbounded


def test_makefile_refuses_an_old_python_in_one_line(tmp_path):
    import shutil
    import subprocess
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    (tmp_path / "Makefile").write_text((ROOT / "Makefile").read_text())
    (tmp_path / "pyproject.toml").write_text("")
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\nexec python3 -c 'import sys; sys.exit(1)'\n")
    fake.chmod(0o755)
    out = subprocess.run([make, "-s", ".venv/bin/python", f"PYTHON={fake}"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    first = out.stderr.strip().splitlines()[0]
    assert "Python >= 3.11" in first and "PYTHON=" in first, out.stderr
    assert not (tmp_path / ".venv").exists()
    assert "PYTHON=" in TEXT["README.md"]
