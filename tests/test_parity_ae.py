"""The parity checker: fixtures (a)-(e) pass, and no file is skipped silently."""

import io
import shutil
from pathlib import Path

import _parity
import numpy as np
import pytest

from dreamerjax.tools.parity import fixtures, main_parity, register, run_parity
from dreamerjax.tools.parity.fixtures import Row

REF = Path(__file__).parent / "data" / "reference"
AE = _parity.AE


@pytest.fixture(scope="module")
def reference_rows():
    return [r for name in AE for r in _parity.rows(name)]


def test_fixtures_a_to_e_pass(reference_rows):
    checked = [r for r in reference_rows if r.fixture in AE and r.kind == fixtures.CHECK]
    assert {r.fixture for r in checked} == set(AE)
    assert len(checked) >= 40
    bad = [r for r in reference_rows if r.fixture in AE and r.fails()]
    assert not bad, bad


def test_every_file_is_accounted_for():
    """Every fixture file has a registered check (or is an input of one): none is
    skipped, none would be `unknown` under --strict."""
    for name in _parity.FILES:
        if fixtures._lookup(fixtures._COMPANIONS, name) is not None:
            continue  # inputs read by the checks of other files (params, configs, README)
        assert fixtures._lookup(fixtures._CHECKS, name) is not None, name


def test_twohot_reference_error_is_shown_beside_ours(reference_rows):
    rows = {r.array: r for r in reference_rows if r.fixture == "twohot.npz"}
    ref_row = rows["(ref) mean_jit vs mean_f64"]
    assert ref_row.kind == fixtures.INFO and ref_row.passed is None
    assert rows["mean vs mean_f64"].passed


def _copy(tmp_path, names):
    for name in names:
        shutil.copy(REF / name, tmp_path / name)


def test_unknown_and_unsupported_files_fail_only_in_strict_mode(tmp_path):
    _copy(tmp_path, ["symlog_symexp.npz", "README.md", "wm_config.yaml"])
    np.savez(tmp_path / "mystery.npz", x=np.zeros(3))
    fixtures.register_unsupported("future_fixture.npz", "a format not checked yet")
    (tmp_path / "future_fixture.npz").write_bytes((REF / "symlog_symexp.npz").read_bytes())
    out = io.StringIO()
    rows, code = run_parity(tmp_path, out=out)
    kinds = {r.fixture: r.kind for r in rows}
    assert kinds["mystery.npz"] == fixtures.UNKNOWN
    assert kinds["future_fixture.npz"] == fixtures.UNSUPPORTED
    assert "README.md" not in kinds and "wm_config.yaml" not in kinds
    assert code == 0
    assert "mystery.npz" in out.getvalue() and "unknown file" in out.getvalue()
    _, code = run_parity(tmp_path, strict=True, print_table=False)
    assert code == 1


def test_failing_and_raising_checks_set_the_exit_code(tmp_path):
    np.savez(tmp_path / "custom_ok.npz", x=np.ones(3))
    np.savez(tmp_path / "custom_bad.npz", x=np.ones(3))
    np.savez(tmp_path / "custom_raise.npz", x=np.ones(3))

    def ok(path):
        x = np.load(path)["x"]
        yield fixtures.compare(path.name, "x", x, np.ones(3), rtol=0.0, tol="exact")

    def bad(path):
        x = np.load(path)["x"]
        yield fixtures.compare(path.name, "x", x * 1.001, x, rtol=1e-6, tol="rtol 1e-6")

    def raises(path):
        raise RuntimeError("boom")
        yield  # pragma: no cover

    try:
        register("custom_ok.npz", ok)
        _, code = run_parity(tmp_path, print_table=False)
        assert code == 0  # the other two files are unknown: not a failure by default
        register("custom_bad.npz", bad)
        register("custom_raise.npz", raises)
        rows, code = run_parity(tmp_path, print_table=False)
        assert code == 1
        by_file = {r.fixture: r for r in rows}
        assert by_file["custom_ok.npz"].passed
        assert not by_file["custom_bad.npz"].passed
        assert by_file["custom_raise.npz"].kind == fixtures.ERROR
        assert "boom" in by_file["custom_raise.npz"].note
    finally:
        for name in ("custom_ok.npz", "custom_bad.npz", "custom_raise.npz"):
            fixtures._CHECKS.pop(name, None)


def test_compare_handles_infinities_and_shapes():
    row = fixtures.compare("f", "a", [1.0, np.inf], [1.0, np.inf], tol="exact")
    assert row.passed
    row = fixtures.compare("f", "a", [1.0, np.inf], [1.0, -np.inf], tol="exact")
    assert not row.passed
    row = fixtures.compare("f", "a", [1.0], [1.0, 2.0], tol="exact")
    assert not row.passed and "shape" in row.note
    assert isinstance(row, Row)


def test_main_parity_exit_codes(tmp_path, capsys):
    assert main_parity(str(tmp_path / "missing"), False) == 2
    _copy(tmp_path, ["retnorm.npz"])
    assert main_parity(str(tmp_path), False) == 0
    assert "retnorm.npz" in capsys.readouterr().out
