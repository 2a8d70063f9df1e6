"""dm_control and mujoco wheels without the files that the Control Suite's state tasks never open.

dm_control 1.0.50's wheel is 56 MB, most of it meshes and textures for the locomotion
package (soccer, CMU humanoid and rodent walkers, arenas), the dog domain, the test
suites and the Blender exporter's docs. `dm_control.suite.load` for cartpole, walker,
cheetah, ... reads only the domain's XML and dm_control/suite/common/, so a machine
that trains those tasks can take a wheel of 0.7 MB. mujoco 3.17.0's Linux wheel is
26 MB, 15 MB of it the experimental Studio viewer (mujoco/experimental/), which neither
`import mujoco` nor dm_control loads; without it the wheel is 11 MB. What goes (`DROPS`,
per distribution): every file but Python modules under each folder listed, and the
single files listed. Python modules stay so that every import still works; a task that
needs a dropped asset fails when it loads: anything of dm_control.locomotion or
dm_control.entities' Kinova arm with FileNotFoundError naming the file, the dog domain
with StopIteration (its asset folder is gone).

The new wheel keeps the name, version and every other entry byte for byte (same zip
entry headers and compression); its RECORD lists the kept files with fresh sha256
and sizes, so `pip install` checks it as any wheel.

    python benchmarks/slim_dm_control.py dm_control-1.0.50-py3-none-any.whl -o DIR

prints one JSON line (bytes before and after, entries dropped) and writes
DIR/dm_control-1.0.50-py3-none-any.whl (the same for a mujoco wheel).
`benchmarks/fetch_dmc_wheels.sh DIR` downloads dm_control, mujoco and the rest of their
dependency closure for a target Python, slims the two and leaves out numpy and scipy.

dm_control 1.0.50's Requires-Dist: absl-py, dm-env, dm-tree, glfw, labmaze, lxml,
mujoco>=3.17.0, numpy, protobuf, pyopengl, pyparsing, requests, setuptools, scipy, tqdm;
mujoco 3.17.0's: absl-py, etils[epath] (fsspec, typing_extensions, zipp), glfw, numpy,
pyopengl, websockets; dm-tree 0.1.10's: attrs, wrapt; requests': certifi,
charset-normalizer, idna, urllib3. The largest are mujoco, lxml, labmaze and pyopengl.

Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import sys
import zipfile

# Folders whose files other than Python modules go, and single files that go.
DROP_FOLDERS = (
    "dm_control/locomotion/",            # walkers', soccer's and arenas' meshes and textures
    "dm_control/suite/dog_assets/",      # the dog domain's meshes and skins
    "dm_control/mujoco/testing/assets/",  # dm_control's own test models and frames
    "dm_control/mjcf/test_assets/",
    "dm_control/blender/",               # the Blender exporter's docs
    "dm_control/third_party/kinova/",    # Jaco arm meshes (dm_control.entities)
)
DROP_FILES = (
    "dm_control/suite/dog.xml",
    "dm_control/suite/all_domains.png",  # a picture for the README
)
# The Studio viewer's web assets, fonts and native modules; mujoco's own viewer
# (mujoco.viewer) and renderers are elsewhere and stay.
MUJOCO_DROP_FOLDERS = ("mujoco/experimental/",)

# A wheel's distribution name (its file name's first field) -> (folders, files).
DROPS = {"dm_control": (DROP_FOLDERS, DROP_FILES),
         "mujoco": (MUJOCO_DROP_FOLDERS, ())}


def distribution(wheel: str) -> str:
    """The distribution name of a wheel file name, normalised as in the file name."""
    return os.path.basename(wheel).split("-", 1)[0].lower().replace("-", "_")


def dropped(name: str, folders=DROP_FOLDERS, files=DROP_FILES) -> bool:
    """Whether the wheel entry `name` (a '/' path) leaves the slim wheel."""
    if name in files:
        return True
    return (any(name.startswith(f) for f in folders) and not name.endswith("/")
            and not name.endswith(".py"))


def record_hash(data: bytes) -> str:
    """A RECORD hash field: 'sha256=' and the urlsafe base64 digest without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _record_name(names) -> str:
    records = [n for n in names if n.endswith(".dist-info/RECORD")
               and n.count("/") == 1]
    if len(records) != 1:
        raise ValueError(f"a wheel has one top-level *.dist-info/RECORD, found {records}")
    return records[0]


def slim_wheel(src: str, out_dir: str, folders=DROP_FOLDERS, files=DROP_FILES) -> dict:
    """Write out_dir/<src's file name> without the dropped entries; return sizes.

    Kept entries are copied with their zip headers (time, permissions, compression);
    RECORD is written last with each kept file's sha256 and size.
    """
    name = os.path.basename(src)
    dst = os.path.join(out_dir, name)
    if os.path.abspath(dst) == os.path.abspath(src):
        raise ValueError(f"-o {out_dir}: the slim wheel would overwrite {src}")
    os.makedirs(out_dir, exist_ok=True)
    kept_rows, n_dropped, dropped_bytes = [], 0, 0
    with zipfile.ZipFile(src) as zin:
        infos = zin.infolist()
        record = _record_name(i.filename for i in infos)
        tmp = dst + ".part"
        with zipfile.ZipFile(tmp, "w") as zout:
            for info in infos:
                if info.filename == record:
                    continue
                if dropped(info.filename, folders, files):
                    n_dropped += 1
                    dropped_bytes += info.file_size
                    continue
                data = zin.read(info.filename)
                zout.writestr(info, data, compress_type=info.compress_type)
                if not info.filename.endswith("/"):
                    kept_rows.append((info.filename, record_hash(data), str(len(data))))
            buf = io.StringIO()
            writer = csv.writer(buf, lineterminator="\n")
            writer.writerows(kept_rows)
            writer.writerow((record, "", ""))
            rinfo = zipfile.ZipInfo(record, date_time=zin.getinfo(record).date_time)
            rinfo.external_attr = zin.getinfo(record).external_attr
            zout.writestr(rinfo, buf.getvalue().encode("utf-8"),
                          compress_type=zipfile.ZIP_DEFLATED)
    os.replace(tmp, dst)
    return {"wheel": name, "bytes_before": os.path.getsize(src),
            "bytes_after": os.path.getsize(dst), "entries_dropped": n_dropped,
            "uncompressed_bytes_dropped": dropped_bytes, "entries_kept": len(kept_rows)}


def check_record(path: str) -> list[str]:
    """The problems of a wheel's RECORD against its entries ([] when it is valid)."""
    problems = []
    with zipfile.ZipFile(path) as z:
        names = [i.filename for i in z.infolist() if not i.filename.endswith("/")]
        record = _record_name(names)
        rows = list(csv.reader(io.StringIO(z.read(record).decode("utf-8"))))
        listed = {r[0] for r in rows}
        for row in rows:
            fname, hash_, size = row
            if fname == record:
                continue
            if fname not in names:
                problems.append(f"{fname}: in RECORD, not in the wheel")
                continue
            data = z.read(fname)
            if hash_ != record_hash(data) or size != str(len(data)):
                problems.append(f"{fname}: RECORD's hash or size is wrong")
        problems += [f"{n}: in the wheel, not in RECORD" for n in names if n not in listed]
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", help="a dm_control or mujoco wheel "
                        "(pip download dm-control --no-deps)")
    parser.add_argument("-o", "--out-dir", required=True,
                        help="folder for the slim wheel (same file name)")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.wheel) or not args.wheel.endswith(".whl"):
        parser.error(f"wheel: {args.wheel} is not a .whl file")
    dist = distribution(args.wheel)
    if dist not in DROPS:
        parser.error(f"wheel: {args.wheel} is neither {' nor '.join(DROPS)}")
    out = slim_wheel(args.wheel, args.out_dir, *DROPS[dist])
    problems = check_record(os.path.join(args.out_dir, out["wheel"]))
    if problems:
        print("slim wheel's RECORD is wrong: " + "; ".join(problems[:3]), file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
