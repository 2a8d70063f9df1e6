"""Where one dreamerjax update's time goes: the bench's 1-seed update program
(dreamerjax/tools/bench/programs.py) under `jax.profiler.trace`, the trace's
per-instruction events summed and matched to the compiled HLO (what each instruction
computes and the JAX op it came from). Prints one JSON object; nothing is asserted.

    python benchmarks/profile_update.py [--size 1m] [--set KEY=VALUE ...] [--updates 3]
        [--top 40] [--out DIR]

Events are summed over all threads (XLA:CPU runs independent work on both cores), so the
total can exceed the wall time. An instruction's count per update tells its place: 1 =
once per update (heads, losses, optimiser), 15 = the imagination scan, 64 = the observe
scan forward or backward.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time


def hlo_index(text: str) -> dict[str, dict]:
    """instruction name -> {"op", "shape", "source", "computation"} from `as_text()`.
    A fusion without its own op_name takes the source of the first fused instruction that
    has one; XLA:CPU's YNNPACK matmul fusions carry none at all, so theirs is the fused
    dot's signature, "dot (lhs, rhs) -> out"."""
    out, comp = {}, None
    fused_src = collections.defaultdict(list)  # computation -> [(op, op_name)]
    signature, has_dot = {}, set()
    head = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
    inst = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\S+(?:\{[^}]*\})?|\([^=]*?\))\s+"
                      r"([\w\-]+)\(")
    for line in text.splitlines():
        m = head.match(line)
        if m and "=" not in line.split("{")[0]:
            comp = m.group(1)
            sig = re.search(r"\((.*)\)\s*->\s*(\S+)", line)
            if sig:
                shapes = re.findall(r"\w+\[[\d,]*\]", sig.group(1))
                signature[comp] = f"({', '.join(shapes)}) -> {sig.group(2)}"
            continue
        m = inst.match(line)
        if m:
            name, shape, op = m.groups()
            src = re.search(r'op_name="([^"]*)"', line)
            kind = re.search(r"kind=(\w+)", line)
            calls = re.search(r"calls=%?([\w.\-]+)", line)
            out[name] = {"op": op + (f"({kind.group(1)})" if kind else ""),
                         "shape": shape[:80], "source": src.group(1)[-120:] if src else "",
                         "computation": comp, "calls": calls.group(1) if calls else None}
            if src:
                fused_src[comp].append((op, src.group(1)[-120:]))
            if op in ("dot", "convolution"):
                has_dot.add(comp)
    for info in out.values():
        called = info["calls"]
        info["fused_dot"] = called in has_dot
        if info["source"] or not called:
            continue
        inner = fused_src.get(called)
        if inner:
            dots = [s for o, s in inner if o in ("dot", "convolution")]
            info["source"] = (dots or [s for _, s in inner])[0]
        elif called in has_dot:
            info["source"] = "dot " + signature.get(called, "?")
    return out


MOVES = ("copy", "concatenate", "slice", "pad", "transpose", "dynamic-slice",
         "dynamic-update-slice", "broadcast", "gather", "scatter")


def kind_of(row: dict) -> str:
    """matmul (a dot, or a fusion around one), data movement (copies, slices, pads,
    concatenations, broadcasts, gathers/scatters, by op or by the JAX op a fusion came
    from) or elementwise / reduction (the rest)."""
    op = row["op"].split("(")[0]
    if op in ("dot", "convolution") or row.get("fused_dot"):
        return "matmul"
    last = row["source"].rsplit("/", 1)[-1].replace("_", "-")
    if op in MOVES or last in MOVES or last == "broadcast-in-dim":
        return "movement"
    return "elementwise"


def _dot_dims(source: str):
    """(lhs, rhs, out) shapes of a "dot (lhs, rhs) -> out" source, or None."""
    m = re.match(r"dot \(f32\[([\d,]+)\], f32\[([\d,]+)\]\) -> f32\[([\d,]+)\]", source)
    if not m:
        return None
    return tuple(tuple(int(d) for d in g.split(",")) for g in m.groups())


def group_of(row: dict) -> tuple[str, float]:
    """(group, FLOPs per execution) of a leaf row, for the summary table of
    results/bench/LOG.md. Groups by place (count per update) and kind; once-per-update
    matmuls by shape: K = 640 (deter + stoch features) into 64 units is the heads' first
    layer, 256-wide the two-hot heads' output layer (255 bins + 1 dropped)."""
    c = round(row["count_per_update"])
    place = {1: "once per update", 15: "imagination step", 64: "observe step"}.get(
        c, f"x{c} (RNG loops)" if c in (75, 320) else f"x{c}")
    if "reduce-window" in row["name"]:
        return f"{place}: split reductions (reduce-window)", 0.0
    dims = _dot_dims(row["source"])
    if row["kind"] == "matmul" and dims:
        (m, k), (_, n), out = dims[0][-2:], dims[1][-2:], dims[2]
        flops = 2.0 * m * k * n if len(dims[0]) == 2 and len(dims[1]) == 2 else 0.0
        if c == 1 and k == 640 and n == 64:
            return "once per update: heads' first layer, forward (features 640 -> 64)", flops
        if c == 1 and out[-2:] == (64, 640):
            return "once per update: heads' first layer, weight gradient", flops
        if c == 1 and 256 in (k, n, *out):
            return "once per update: two-hot heads' 256-wide output layer, fwd + bwd", flops
        return f"{place}: other matmuls", flops
    return f"{place}: {row['kind']}", 0.0


def trace_events(logdir: str) -> list[dict]:
    paths = glob.glob(os.path.join(logdir, "**", "*.trace.json.gz"), recursive=True)
    paths += glob.glob(os.path.join(logdir, "**", "perfetto_trace.json.gz"), recursive=True)
    if not paths:
        raise SystemExit(f"no trace file under {logdir}")
    with gzip.open(sorted(paths)[-1], "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def analyse(index: dict, events: list, updates: int, top: int) -> dict:
    """Sum the trace's per-instruction events per update; see the module docstring."""
    per = collections.defaultdict(lambda: [0.0, 0])
    for ev in events:
        if ev.get("ph") != "X" or ev.get("name") not in index:
            continue
        per[ev["name"]][0] += ev.get("dur", 0.0) / 1e3  # us -> ms
        per[ev["name"]][1] += 1
    rows = []
    for name, (ms, n) in per.items():
        info = index[name]
        rows.append({"name": name, "ms_per_update": ms / updates,
                     "count_per_update": n / updates, **info})
    rows.sort(key=lambda r: -r["ms_per_update"])
    # Leaf instructions only (a while/call/conditional event spans its body's events).
    leaf = [r for r in rows if not r["op"].startswith(("while", "call", "conditional"))]
    by_count = collections.defaultdict(float)
    for r in leaf:
        by_count[round(r["count_per_update"])] += r["ms_per_update"]
    by_kind = collections.defaultdict(float)
    for r in leaf:
        by_kind[r["op"]] += r["ms_per_update"]
    by_class = collections.defaultdict(lambda: collections.defaultdict(float))
    for r in leaf:
        r["kind"] = kind_of(r)
        by_class[round(r["count_per_update"])][r["kind"]] += r["ms_per_update"]
    groups = collections.defaultdict(lambda: {"ms_per_update": 0.0, "gflop_per_update": 0.0})
    for r in leaf:
        name, flops = group_of(r)
        groups[name]["ms_per_update"] += r["ms_per_update"]
        groups[name]["gflop_per_update"] += flops * r["count_per_update"] / 1e9
    return {
        "leaf_ms_per_update_all_threads": sum(r["ms_per_update"] for r in leaf),
        "groups": dict(sorted(groups.items(), key=lambda kv: -kv[1]["ms_per_update"])),
        "leaf_ms_by_count_per_update": dict(sorted(by_count.items())),
        "leaf_ms_by_op": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])[:20]),
        "leaf_ms_by_count_and_kind": {k: dict(v) for k, v in sorted(by_class.items())},
        "top": leaf[:top],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="1m", help="the model size (the bench's CartPole)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config item, as `dreamerjax train --set` (jax.compute_dtype=bfloat16)")
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--out", default=None, help="keep the trace here (default: a temp dir)")
    p.add_argument("--parse", metavar="DIR", help="only analyse the trace and update.hlo.txt "
                   "an earlier run left in DIR (its --out); --updates must be that run's")
    args = p.parse_args(argv)
    if args.updates < 1:
        raise SystemExit(f"--updates must be >= 1, got {args.updates}")
    if args.parse:
        with open(os.path.join(args.parse, "update.hlo.txt")) as f:
            index = hlo_index(f.read())
        summary = analyse(index, trace_events(args.parse), args.updates, args.top)
        json.dump({**summary, "trace_dir": args.parse}, sys.stdout, indent=1)
        print()
        return 0

    from dreamerjax.run import xla_tuning
    xla_tuning.apply()
    import jax

    from dreamerjax.tools import bench

    setup = bench.make_setup(False, tuple(args.set), size=args.size)
    compiled, _ = bench.compile_update(setup, 1)
    text = compiled.as_text()
    index = hlo_index(text)
    fill = bench.ticks_program(setup, bench.FILL_TICKS)
    states = jax.block_until_ready(fill(bench.init_states(setup, 1)))
    for _ in range(3):
        states = jax.block_until_ready(compiled(states))
    logdir = args.out or tempfile.mkdtemp(prefix="dreamerjax-profile-")
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, "update.hlo.txt"), "w") as f:
        f.write(text)
    t = time.perf_counter()
    with jax.profiler.trace(logdir, create_perfetto_trace=True):
        for _ in range(args.updates):
            states = jax.block_until_ready(compiled(states))
    wall = (time.perf_counter() - t) / args.updates

    summary = analyse(index, trace_events(logdir), args.updates, args.top)
    json.dump({
        "wall_s_per_update_traced": wall, **summary, "trace_dir": logdir,
        "size": args.size, "set": args.set, "device_kind": jax.devices()[0].device_kind,
        "jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
