"""benchmarks/slim_dm_control.py on a small wheel written here with zipfile: the dropped
assets leave, Python modules and every other entry stay byte for byte, RECORD matches the
new wheel, and pip installs it."""

import csv
import io
import os
import subprocess
import sys
import zipfile

import pytest
from _benchmarks import load

slim = load("slim_dm_control.py")

DIST = "dm_control-9.9.9.dist-info"
ENTRIES = {
    "dm_control/__init__.py": b"",
    "dm_control/suite/__init__.py": b"NAME = 'suite'\n",
    "dm_control/suite/cartpole.xml": b"<mujoco model='cartpole'/>\n",
    "dm_control/suite/common/skybox.xml": b"<mujoco/>\n",
    "dm_control/suite/dog.xml": b"<mujoco model='dog'/>\n",                 # a dropped file
    "dm_control/suite/dog_assets/skin.skn": os.urandom(4096),              # dropped folder
    "dm_control/locomotion/__init__.py": b"",
    "dm_control/locomotion/walkers/cmu.py": b"WALKER = 1\n",               # kept: a module
    "dm_control/locomotion/walkers/assets/body.stl": b"solid body\n" * 400,
    "dm_control/locomotion/soccer/assets/ball.png": os.urandom(2048),
    "dm_control/blender/README.md": b"the exporter\n",
    f"{DIST}/METADATA": b"Metadata-Version: 2.1\nName: dm_control\nVersion: 9.9.9\n",
    f"{DIST}/WHEEL": (b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                      b"Tag: py3-none-any\n"),
    f"{DIST}/top_level.txt": b"dm_control\n",
}
GONE = {"dm_control/suite/dog.xml", "dm_control/suite/dog_assets/skin.skn",
        "dm_control/locomotion/walkers/assets/body.stl",
        "dm_control/locomotion/soccer/assets/ball.png", "dm_control/blender/README.md"}


def _wheel(folder):
    """A wheel of ENTRIES with a correct RECORD, some entries stored, some deflated."""
    path = folder / "dm_control-9.9.9-py3-none-any.whl"
    rows = []
    with zipfile.ZipFile(path, "w") as z:
        for i, (name, data) in enumerate(ENTRIES.items()):
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 5 + i))
            info.external_attr = 0o644 << 16
            z.writestr(info, data, compress_type=(zipfile.ZIP_STORED if i % 2
                                                  else zipfile.ZIP_DEFLATED))
            rows.append((name, slim.record_hash(data), str(len(data))))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*rows, (f"{DIST}/RECORD", "", "")])
        z.writestr(f"{DIST}/RECORD", buf.getvalue())
    return path


def test_the_slim_wheel_drops_assets_keeps_the_rest_and_installs(tmp_path):
    src = _wheel(tmp_path)
    assert slim.check_record(str(src)) == []
    out = slim.slim_wheel(str(src), str(tmp_path / "slim"))
    dst = tmp_path / "slim" / src.name
    assert out["entries_dropped"] == len(GONE)
    assert out["bytes_after"] == dst.stat().st_size < out["bytes_before"]
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst) as zout:
        names = set(zout.namelist())
        assert names == (set(ENTRIES) - GONE) | {f"{DIST}/RECORD"}
        assert "dm_control/locomotion/walkers/cmu.py" in names
        for name in names - {f"{DIST}/RECORD"}:
            a, b = zin.getinfo(name), zout.getinfo(name)
            assert zout.read(name) == ENTRIES[name]
            assert (b.date_time, b.compress_type, b.external_attr) == (
                a.date_time, a.compress_type, a.external_attr), name
    assert slim.check_record(str(dst)) == []

    target = tmp_path / "site"
    env = os.environ | {"PIP_CONFIG_FILE": os.devnull}  # no index, no find-links
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(dst)],
        capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (target / "dm_control" / "suite" / "cartpole.xml").read_bytes() == (
        ENTRIES["dm_control/suite/cartpole.xml"])
    assert (target / "dm_control" / "locomotion" / "walkers" / "cmu.py").exists()
    assert not (target / "dm_control" / "suite" / "dog.xml").exists()
    assert not (target / "dm_control" / "locomotion" / "walkers" / "assets").exists()


def test_check_record_names_a_wrong_hash_and_a_missing_row(tmp_path):
    src = _wheel(tmp_path)
    bad = tmp_path / "bad" / src.name
    bad.parent.mkdir()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bad, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "dm_control/suite/cartpole.xml":
                data = data.replace(b"cartpole", b"cartpolE")
            zout.writestr(info, data)
        zout.writestr("dm_control/extra.txt", b"not in RECORD")
    assert slim.check_record(str(bad)) == [
        "dm_control/suite/cartpole.xml: RECORD's hash or size is wrong",
        "dm_control/extra.txt: in the wheel, not in RECORD"]


def test_the_command_picks_mujoco_drops_and_refuses_other_wheels(tmp_path, capsys):
    name = "mujoco-9.9.9-cp311-cp311-manylinux_2_28_x86_64.whl"
    dist = "mujoco-9.9.9.dist-info"
    src = tmp_path / name
    with zipfile.ZipFile(src, "w") as z:
        files = {"mujoco/__init__.py": b"", "mujoco/libmujoco.so": b"\x7fELF" * 100,
                 "mujoco/experimental/studio/web/app.js": b"x" * 1000,
                 "mujoco/experimental/studio/viewer.py": b"V = 1\n"}
        for n, data in files.items():
            z.writestr(n, data)
        rows = [(n, slim.record_hash(d), str(len(d))) for n, d in files.items()]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*rows, (f"{dist}/RECORD", "", "")])
        z.writestr(f"{dist}/RECORD", buf.getvalue())
    assert slim.main([str(src), "-o", str(tmp_path / "out")]) == 0
    with zipfile.ZipFile(tmp_path / "out" / name) as z:
        assert sorted(z.namelist()) == sorted(
            ["mujoco/__init__.py", "mujoco/libmujoco.so",
             "mujoco/experimental/studio/viewer.py", f"{dist}/RECORD"])
    other = tmp_path / "lxml-1.0-py3-none-any.whl"
    other.write_bytes(src.read_bytes())
    with pytest.raises(SystemExit):
        slim.main([str(other), "-o", str(tmp_path / "out2")])
    assert "is neither dm_control nor mujoco" in capsys.readouterr().err
