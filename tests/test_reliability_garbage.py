"""Garbage in: every `dreamerjax train` flag fed wrong types, negative, zero,
huge, NaN and empty values, and missing or unreadable files for --resume / --config.
Every case exits non-zero with one line naming the flag, no traceback, before the driver
(and with it any compile) is imported, and writes nothing."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dreamerjax.config.defaults import SIZES  # noqa: E402
from dreamerjax.tools import cli  # noqa: E402

BIG = 10**40


def _not_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return True
    return False


def _not_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return True
    return False


# Values no flag may start with (they would read as another flag) and NUL (no argv has it).
_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                max_size=12).filter(lambda t: not t.startswith("--"))
_non_int = _text.filter(_not_int) | st.sampled_from(["nan", "inf", "-inf", "1.5", "1e3", "",
                                                     "0x10", "one"])
_negative = st.integers(max_value=-1).map(str)
_huge = st.integers(min_value=2**31, max_value=BIG).map(str)


def _int_garbage(zero_ok: bool):
    bad = [_non_int, _negative, _huge]
    if not zero_ok:
        bad.append(st.just("0"))
    return st.one_of(bad)


_float_garbage = st.one_of(
    _text.filter(_not_float) | st.just(""), _negative,
    st.sampled_from(["0", "0.0", "-0.5", "nan", "-nan", "inf", "-inf", "1e300", "2e6"]))

# flag -> strategy of its garbage argv tail (values only)
SCALARS = {
    "--steps": _int_garbage(False), "--eval-every": _int_garbage(False),
    "--eval-episodes": _int_garbage(False), "--num-envs": _int_garbage(False),
    "--checkpoint-every": _int_garbage(True), "--devices": _int_garbage(False),
    "--report-every": _int_garbage(True), "--video-every": _int_garbage(True),
    "--cnn-minres": _int_garbage(False), "--train-ratio": _float_garbage,
    "--size": _text.filter(lambda t: t not in SIZES),
    "--twohot-mean": _text.filter(lambda t: t not in ("exact", "pairsum")),
    "--env": st.just("") | st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,10}", fullmatch=True),
    "--coordinator": st.just(""),
}
LISTS = {"--seeds": _int_garbage(True), "--cnn-mults": _int_garbage(False)}
DISTRIBUTED = {"--num-processes": _int_garbage(False), "--process-id": _negative | _huge}
BOOLS = ("--tiny", "--no-compile-cache", "--distributed")


@contextlib.contextmanager
def _no_driver():
    """The driver (JAX's compiled programs) must not be imported by a refused command."""
    saved = sys.modules.get("dreamerjax.run.driver")
    sys.modules["dreamerjax.run.driver"] = None
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("dreamerjax.run.driver", None)
        else:
            sys.modules["dreamerjax.run.driver"] = saved


def _tree(root: Path) -> list[tuple[str, int, float]]:
    out = []
    for d, _, files in os.walk(root):
        for f in [*files, "."]:
            p = Path(d) / f
            out.append((str(p), p.stat().st_size if p.is_file() else -1, p.stat().st_mtime))
    return sorted(out)


def _refused(argv: list[str], root: Path, flag: str) -> str:
    """Run cli.main(argv) in-process; assert the refusal; return its line."""
    before = _tree(root)
    err = io.StringIO()
    with _no_driver(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # tyro's parser
            code = e.code
    text = err.getvalue()
    assert code not in (0, None), (argv, text)
    assert "Traceback" not in text, (argv, text)
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, (argv, text)
    assert lines[0].startswith("dreamerjax train: error:"), (argv, text)
    assert flag in lines[0], (argv, flag, text)
    assert _tree(root) == before, f"{argv} wrote to {root}"
    return lines[0]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A directory with the files the garbage refers to (never changed by the tests)."""
    base = tmp_path_factory.mktemp("garbage")
    (base / "file").write_text("not a directory\n")
    (base / "full").mkdir()
    (base / "full" / "x").write_text("x")
    (base / "noconfig").mkdir()
    (base / "noconfig" / "records.jsonl").write_text("")
    (base / "badconfig").mkdir()
    (base / "badconfig" / "config.json").write_bytes(b"\x00\xff{not json")
    (base / "dirconfig" / "config.json").mkdir(parents=True)
    (base / "listconfig").mkdir()
    (base / "listconfig" / "config.json").write_text(json.dumps([1, 2]))
    (base / "bad.yaml").write_text("run: [unclosed\n")
    (base / "list.yaml").write_text("- 1\n- 2\n")
    (base / "binary.yaml").write_bytes(b"\xff\xfe\x00\x01")
    (base / "unknown.yaml").write_text("run.no_such_key: 3\n")
    return base


_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


@_SETTINGS
@given(data=st.data(), flag=st.sampled_from(sorted(SCALARS)))
def test_scalar_flags(root, data, flag):
    value = data.draw(SCALARS[flag])
    _refused(["train", "--out", str(root / "new"), flag, value], root, flag)


@_SETTINGS
@given(data=st.data(), flag=st.sampled_from(sorted(LISTS)))
def test_list_flags(root, data, flag):
    good = data.draw(st.lists(st.integers(1, 9).map(str), max_size=2))
    bad = data.draw(LISTS[flag])
    values = data.draw(st.permutations([*good, bad]))
    _refused(["train", "--out", str(root / "new"), flag, *values], root, flag)


@_SETTINGS
@given(data=st.data(), flag=st.sampled_from(sorted(DISTRIBUTED)))
def test_distributed_flags(root, data, flag):
    value = data.draw(DISTRIBUTED[flag])
    _refused(["train", "--out", str(root / "new"), "--distributed", flag, value], root, flag)


@_SETTINGS
@given(flag=st.sampled_from(BOOLS), value=_text.filter(lambda t: not t.startswith("-")))
def test_bool_flags_take_no_value(root, flag, value):
    _refused(["train", "--out", str(root / "new"), flag, value], root, flag)


def test_missing_values_repeats_and_unknown_flags(root):
    new = str(root / "new")
    for flag in [*SCALARS, *LISTS, "--out", "--resume", "--config"]:
        _refused(["train", "--out", new, flag], root, flag)
    _refused(["train", "--out", new, "--steps", "10", "20"], root, "--steps")
    _refused(["train", "--out", new, "--no-such-flag", "3"], root, "--no-such-flag")
    _refused(["train", "--out", new, "--steps=abc"], root, "--steps")
    _refused(["train", "--out", new, "--seeds", "1", "1"], root, "--seeds")
    _refused(["train", "--out", new, "--seeds"], root, "--seeds")


@pytest.mark.parametrize("value, message", [
    ("", "must not be empty"), ("{root}/missing", "no such run directory"),
    ("{root}/file", "no such run directory"), ("{root}/noconfig", "cannot read the run's"),
    ("{root}/badconfig", "cannot read the run's"), ("{root}/dirconfig", "cannot read"),
    ("{root}/listconfig", "config.json is damaged: holds a list"),
])
def test_resume_missing_or_unreadable(root, value, message):
    line = _refused(["train", "--resume", value.format(root=root)], root, "--resume")
    assert message in line


@pytest.mark.parametrize("value", ["", "{root}/missing.yaml", "{root}/full", "{root}/bad.yaml",
                                   "{root}/list.yaml", "{root}/binary.yaml",
                                   "{root}/unknown.yaml"])
def test_config_missing_or_unreadable(root, value):
    _refused(["train", "--out", str(root / "new"), "--config", value.format(root=root)], root,
             "--config")


@pytest.mark.parametrize("value, flag", [("", "--out"), ("{root}/file", "--out"),
                                         ("{root}/full", "--out")])
def test_out_unusable(root, value, flag):
    _refused(["train", "--out", value.format(root=root)], root, flag)
