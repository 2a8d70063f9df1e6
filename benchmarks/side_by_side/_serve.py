"""The protocol every driver speaks with run.py (standard library only: drivers run in
three different virtual environments and Python versions).

A driver builds its program's jitted train step, then calls `serve(step, info)`. run.py
sends one JSON command per line on the driver's stdin and reads one JSON reply per line
from the file descriptor the driver's stdout had at start; everything the programs print
(the reference prints a lot) goes to stderr, which run.py sends to a log file.

Commands: {"cmd": "time", "warmup": W, "updates": N} -> {"seconds": [N floats], "rss_mib"};
{"cmd": "quit"} -> {"rss_mib"}, then exit. `step()` runs one update and blocks until its
outputs are ready; `info` (compile seconds, shapes, versions) is sent once when ready.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

_PROTO = None


def claim_stdout() -> None:
    """Keep the original stdout for replies and send fd 1 (C and Python prints) to stderr.
    Call before importing anything that prints."""
    global _PROTO
    _PROTO = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def rss_mib() -> float:
    """Peak resident set size of this process so far (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reply(obj: dict) -> None:
    _PROTO.write(json.dumps(obj) + "\n")
    _PROTO.flush()


def serve(step, info: dict, check=None, extra=None) -> None:
    """Answer run.py's commands until "quit". `check()` (optional) returns a dict added to
    every "time" reply, e.g. whether the last update's losses were finite; `extra` maps
    further command names to functions of no argument returning a dict."""
    reply({"ready": True, "rss_mib": rss_mib(), **info})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "time":
            for _ in range(cmd["warmup"]):
                step()
            secs = []
            for _ in range(cmd["updates"]):
                t = time.perf_counter()
                step()
                secs.append(time.perf_counter() - t)
            reply({"seconds": secs, "rss_mib": rss_mib(), **(check() if check else {})})
        elif cmd["cmd"] == "quit":
            reply({"rss_mib": rss_mib()})
            return
        elif extra and cmd["cmd"] in extra:
            reply(extra[cmd["cmd"]]())
        else:
            reply({"error": f"unknown command {cmd['cmd']!r}"})


def timed(fn, *args, **kw):
    """(result, seconds) of one call."""
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t
