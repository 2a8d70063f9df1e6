"""`dreamerjax parity --strict` per fixture file under a chosen matmul precision, on whatever
backend JAX finds (a TPU's default precision multiplies float32 in bfloat16 passes).

    python benchmarks/parity_precision.py tests/data/reference tests/data/reference_head \
        --precision default highest --out parity_tpu.jsonl

One JSON line per (precision, file): the backend and device kind, the rows checked, the
failing rows with their errors and allowances (the allowance a family would need), and
the seconds taken. Each precision runs in its own child process, because JAX reads
`jax_default_matmul_precision` when it traces. Data-parallel files (`*dpN*`) need N
devices; a file the backend has too few devices for is reported as skipped. Figures are
printed as they come, so a run cut off by a time limit keeps the files it checked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def check_files(directories: list[str], precision: str) -> None:
    """In this process: every file of the directories under `precision`, a line each."""
    import jax

    if precision != "default":
        jax.config.update("jax_default_matmul_precision", precision)
    from dreamerjax.tools.parity import fixtures
    from dreamerjax.tools.parity.agent_checks import data_devices_of

    device = jax.devices()[0]
    for directory in directories:
        for path in sorted(p for p in Path(directory).iterdir() if p.suffix == ".npz"):
            line = {"precision": precision, "backend": jax.default_backend(),
                    "device_kind": device.device_kind, "file": f"{path.parent.name}/{path.name}"}
            need = data_devices_of(path.name)
            if need > jax.device_count():
                print(json.dumps({**line, "skipped": f"needs {need} devices"}), flush=True)
                continue
            t0 = time.perf_counter()
            rows, _ = fixtures.check_file(path)
            failing = [r for r in rows if r.fails(strict=True)]
            print(json.dumps({
                **line, "rows": sum(r.kind == fixtures.CHECK for r in rows),
                "failing": len(failing), "seconds": round(time.perf_counter() - t0, 1),
                "fails": [{"array": r.array, "max_abs_err": r.max_abs_err,
                           "max_rel_err": r.max_rel_err, "tolerance": r.tolerance,
                           "status": r.status} for r in failing]}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directories", nargs="+")
    ap.add_argument("--precision", nargs="+", default=["default", "highest"],
                    choices=["default", "high", "highest"])
    ap.add_argument("--out", help="also append the JSON lines to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        check_files(args.directories, args.child)
        return 0
    out = open(args.out, "a") if args.out else None  # noqa: SIM115
    for precision in args.precision:
        cmd = [sys.executable, __file__, *args.directories, "--child", precision]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ)) as p:
            for line in p.stdout:
                sys.stdout.write(line)
                if out:
                    out.write(line)
                    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
