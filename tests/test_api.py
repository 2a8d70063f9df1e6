"""The package as a Python user calls it: `dreamerjax.train` refuses a used directory
before building anything, returns a result whose policy acts in memory as the checkpoint's
does, and `import dreamerjax` lists its public names."""

import pytest
from _runs import small_config

import dreamerjax
from dreamerjax.run import driver
from dreamerjax.run import lock as runlock


def _snapshot(root):
    """Every file under root: {relative path: (bytes, mtime_ns)}."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_train_refuses_a_used_directory_before_building_anything(tmp_path, monkeypatch):
    """A second run into a directory would append to its records, overwrite its config and
    fail at its first checkpoint: refused in one line naming it, the directory untouched."""
    out = tmp_path / "used"
    (out / "checkpoints").mkdir(parents=True)
    (out / "records.jsonl").write_text('{"seed": 0, "rows": 80}\n')
    (out / "config.json").write_text("{}\n")
    before = _snapshot(out)

    def no_setup(*args, **kwargs):
        raise AssertionError("a setup was built (and would be compiled) for a used directory")

    monkeypatch.setattr(driver.setup_lib, "make_setup", no_setup)
    with pytest.raises(runlock.RunDirNotEmpty) as err:
        dreamerjax.train(small_config(), (0,), str(out), progress=False, compile_cache=False)
    message = str(err.value)
    assert message == (f"out {out} exists and is not empty; continue that run with "
                       "resume=True, or choose another out")
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == [
        "checkpoints", "config.json", "records.jsonl"]  # no lock file left either

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(runlock.RunDirNotEmpty, match="exists and is not a directory"):
        dreamerjax.train(small_config(), (0,), str(a_file), progress=False,
                         compile_cache=False)
    assert a_file.read_text() == "x"
