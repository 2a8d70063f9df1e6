"""`dreamerjax bench --sweep`: every point of --sizes x --dtypes x --seeds in one process,
one JSON line per point as it finishes (run_sweep)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from dreamerjax.tools.bench.flops import update_flops, with_flops
from dreamerjax.tools.bench.options import SIZE, SWEEP_SEEDS, Options
from dreamerjax.tools.bench.programs import DoesNotFit, measure_point
from dreamerjax.tools.bench.timing import _now, machine


def sweep_points(opts: Options) -> list[tuple[str, str, int]]:
    """(size, dtype, seeds) of --sweep, in the order they run: small sizes first."""
    sizes = ("tiny",) if opts.tiny else opts.sizes
    return [(s, d, n) for s in sizes for d in opts.dtypes
            for n in (opts.seeds or SWEEP_SEEDS)]


def _key(line: dict) -> tuple[str, str, int]:
    return (line["size"], line["dtype"], int(line["seeds"]))


def read_sweep(path: str | None) -> tuple[set, dict]:
    """(points finished in the file at `path`, times each unfinished point was started)."""
    done, started = set(), {}
    if path and os.path.exists(path):
        with open(path) as f:
            for text in f:
                with contextlib.suppress(ValueError, KeyError):
                    line = json.loads(text)
                    if line["status"] == "started":
                        started[_key(line)] = started.get(_key(line), 0) + 1
                    else:
                        done.add(_key(line))
    return done, {k: v for k, v in started.items() if k not in done}


def run_sweep(opts: Options) -> int:
    """--sweep: every (size, dtype, seeds) point timed in this process, one JSON line per
    point printed (and appended to --out) as it finishes, so a command cut off by a time
    limit keeps what it measured; run again with the same --out, it goes on from the
    first point not in the file. A point that does not fit the device gets a line saying
    so; a point started twice without finishing (cut off) is skipped with a line."""
    import gc

    import jax
    start = time.perf_counter()
    info = machine()
    done, started = read_sweep(opts.out)
    flops_of: dict = {}
    plans: dict = {}  # (size, dtype) -> its plan, for its other seed counts
    too_big: set = set()
    head = {"platform": info["backend"], "device_kind": info["device"], "jax": info["jax"]}

    def emit(line: dict) -> None:
        text = json.dumps({**line, **head, "date": _now()}, sort_keys=True)
        print(text, flush=True)
        if opts.out:
            os.makedirs(os.path.dirname(opts.out) or ".", exist_ok=True)
            with open(opts.out, "a") as f:
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())

    for size, dtype, n in sweep_points(opts):
        key = {"size": size, "dtype": dtype, "seeds": n}
        if (size, dtype, n) in done:
            continue
        if opts.budget is not None and time.perf_counter() - start > opts.budget:
            print(f"dreamerjax bench --sweep: --budget {opts.budget:g} s spent; run the same "
                  "command again to go on", file=sys.stderr)
            return 0
        if started.get((size, dtype, n), 0) >= 2:
            emit({**key, "status": "cut_off", "reason": "started twice without finishing "
                  "(a time limit ended the command); skipped"})
            continue
        if any(s == size and d == dtype and m < n for s, d, m in too_big):
            emit({**key, "status": "skipped", "reason": "fewer seeds of this size and "
                  "dtype did not fit the device"})
            continue
        emit({**key, "status": "started"})
        try:
            point = measure_point(opts, SIZE if opts.tiny else size, dtype, n,
                                  like=plans.get((size, dtype)))
            plans[size, dtype] = point.pop("_plan")  # its config checked once
            setup = point.pop("_setup")
            if (size, dtype) not in flops_of:
                flops_of[size, dtype] = update_flops(setup)
            emit({**with_flops(point, *flops_of[size, dtype], info["device"]),
                  **key, "status": "ok"})
        except (DoesNotFit, MemoryError) as e:
            too_big.add((size, dtype, n))
            emit({**key, "status": "skipped", "reason": one_line(e)})
        except Exception as e:  # noqa: BLE001 - an allocation the analysis did not foresee
            if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
                emit({**key, "status": "failed", "reason": one_line(e)[:500]})
            else:
                too_big.add((size, dtype, n))
                emit({**key, "status": "skipped",
                      "reason": "out of device memory: " + one_line(e)[:300]})
        finally:
            point = setup = None
            gc.collect()
            jax.clear_caches()
    return 0


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())
