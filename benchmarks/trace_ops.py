"""Where an accelerator's time went, from a JAX profiler trace (an `*.xplane.pb` file),
program by program and op category by op category. One reader for every program's trace,
so two programs' profiles compare like for like: dreamerjax's (benchmarks/profile_update.py
--out DIR) and the reference's (e3f0224 traces its updates 100-120 into its logdir by
default, embodied/jax/agent.py:296-311 @e3f0224). Prints one JSON object; asserts nothing.

    python benchmarks/trace_ops.py TRACE [--program SUBSTRING] [--top 30]

TRACE is an xplane.pb file or a folder holding one (searched recursively). For each device
plane (`/device:TPU:0`, ...), the "XLA Modules" line gives each program's executions and
the "XLA Ops" line its instructions; every leaf op event (one that encloses no other: a
loop's event spans its body's) is charged to the module execution that encloses it. Per
module: executions, milliseconds per execution, and per execution the milliseconds by
class (matmul, data movement, elementwise: `op_class`), by the profiler's `hlo_category`
where the trace has it, by HLO op kind, and the top instructions with their HLO text.
With no device plane (a CPU trace), it lists the planes and lines it found.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import glob
import json
import os
import re
import sys


def find_xplane(path: str) -> str:
    if os.path.isfile(path):
        return path
    found = sorted(glob.glob(os.path.join(path, "**", "*.xplane.pb"), recursive=True))
    if not found:
        raise SystemExit(f"{path}: no *.xplane.pb file")
    return found[-1]


def op_kind(text: str) -> str:
    """The HLO op of an instruction's text ("%fusion.3 = bf16[8]{0} fusion(...),
    kind=kLoop"; a tuple shape in parentheses), with a fusion's kind; the text itself when
    it is no instruction."""
    _, eq, rest = text.partition(" = ")
    if not eq:
        return text
    if rest.startswith("("):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                rest = rest[i + 1:]
                break
    else:
        rest = rest.partition(" ")[2]
    op = rest.strip().partition("(")[0]
    kind = re.search(r"kind=(k\w+)", text)
    return op + (f"({kind.group(1)})" if kind else "")


def leaves(events: list) -> list:
    """The events that enclose no other (a while loop's or a call's event spans its body's
    events on the same line; counting both would count the body twice)."""
    events = sorted(events, key=lambda e: (e.start_ns, -e.duration_ns))
    out = []
    for i, ev in enumerate(events):
        nxt = events[i + 1] if i + 1 < len(events) else None
        if nxt is None or nxt.start_ns >= ev.start_ns + ev.duration_ns:
            out.append(ev)
    return out


MOVES = ("copy", "copy-start", "copy-done", "transpose", "bitcast", "slice",
         "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "broadcast",
         "reshape", "reverse", "gather", "scatter")


def op_class(kind: str) -> str:
    """matmul (a convolution, or a fusion around one: XLA:TPU's kOutput fusions), data
    movement (copies, layout changes, slices, gathers and scatters, also as kCustom
    fusions), elementwise / reduction (kLoop and kInput fusions, the rest)."""
    op = kind.split("(")[0]
    if op in ("convolution", "dot") or "kOutput" in kind:
        return "matmul"
    if op in MOVES or "kCustom" in kind:
        return "movement"
    return "elementwise"


def summarise(path: str, program: str | None, top: int) -> dict:
    from jax.profiler import ProfileData
    data = ProfileData.from_file(path)
    out: dict = {"trace": path, "devices": {}}
    for plane in data.planes:
        if not plane.name.startswith("/device:"):
            continue
        lines = {line.name: list(line.events) for line in plane.lines}
        modules = sorted(lines.get("XLA Modules", []), key=lambda e: e.start_ns)
        ops = lines.get("XLA Ops", [])
        if not modules or not ops:
            out["devices"][plane.name] = {"lines": sorted(lines)}
            continue
        starts = [m.start_ns for m in modules]
        ops = leaves(ops)
        per = collections.defaultdict(lambda: {
            "executions": 0, "ms": 0.0, "category": collections.defaultdict(float),
            "op": collections.defaultdict(float), "class": collections.defaultdict(float),
            "ops": collections.defaultdict(
                lambda: {"ms": 0.0, "count": 0, "hlo": ""})})
        for m in modules:
            rec = per[m.name]
            rec["executions"] += 1
            rec["ms"] += m.duration_ns / 1e6
        for ev in ops:
            i = bisect.bisect_right(starts, ev.start_ns) - 1
            if i < 0 or ev.start_ns > modules[i].start_ns + modules[i].duration_ns:
                continue
            rec = per[modules[i].name]
            stats = dict(ev.stats)
            ms = ev.duration_ns / 1e6
            long_name = str(stats.get("long_name", ""))
            rec["category"][str(stats.get("hlo_category", "unknown"))] += ms
            kind = op_kind(long_name or ev.name)
            rec["op"][kind] += ms
            rec["class"][op_class(kind)] += ms
            o = rec["ops"][(long_name or ev.name).partition(" = ")[0]]
            o["ms"] += ms
            o["count"] += 1
            o["hlo"] = o["hlo"] or (long_name or ev.name)[:300]
        device = {}
        for name, rec in per.items():
            if program and program not in name:
                continue
            n = rec["executions"]
            op_ms = sum(rec["category"].values())

            def per_exec(d, n=n):
                return dict(sorted(((k, v / n) for k, v in d.items()), key=lambda kv: -kv[1]))

            top_ops = sorted(rec["ops"].items(), key=lambda kv: -kv[1]["ms"])[:top]
            device[name] = {
                "executions": n, "ms_per_execution": rec["ms"] / n,
                "op_ms_per_execution": op_ms / n,
                "ms_by_class": per_exec(rec["class"]),
                "ms_by_category": per_exec(rec["category"]),
                "ms_by_op": dict(list(per_exec(rec["op"]).items())[:25]),
                "top": [{"name": k, "ms_per_execution": v["ms"] / n,
                         "count_per_execution": v["count"] / n, "hlo": v["hlo"]}
                        for k, v in top_ops],
            }
        out["devices"][plane.name] = dict(sorted(
            device.items(), key=lambda kv: -kv[1]["ms_per_execution"] * kv[1]["executions"]))
    if not out["devices"]:
        out["planes"] = {p.name: sorted({line.name for line in p.lines}) for p in data.planes}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="an xplane.pb file or a folder with one")
    p.add_argument("--program", help="only modules whose name holds this")
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args(argv)
    json.dump(summarise(find_xplane(args.trace), args.program, args.top), sys.stdout,
              indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
