"""Named points of a run where the reliability tests pause it, to kill it inside a window.

    DREAMERJAX_TEST_PAUSE="records_line:1,checkpoint:0=0.2,chunk:2=0"

arms `name:log_index[=seconds]` points (default 600 s). At an armed point the process
prints `[dreamerjax-test] at NAME:INDEX` to stderr and sleeps; nothing happens when the
variable is unset (one dict lookup per point). Points: chunk (before a log interval's
chunk runs), records (episodes written, records not yet), records_line (half of the
records' text written and fsynced: a torn line on disk), tensorboard (records written,
scalars not yet), checkpoint (before orbax's save), manifest (orbax committed, its
manifest not yet written), stopped (after a SIGTERM/SIGINT stop's last checkpoint).
"""

from __future__ import annotations

import os
import sys
import time

ENV = "DREAMERJAX_TEST_PAUSE"
DEFAULT_S = 600.0

current = -1  # the log index of the interval being run (set at the chunk point)


def _armed() -> dict[str, float]:
    spec = os.environ.get(ENV, "")
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, secs = item.partition("=")
        out[name] = float(secs) if secs else DEFAULT_S
    return out


def armed(name: str, index: int | None = None) -> bool:
    if ENV not in os.environ:
        return False
    return f"{name}:{current if index is None else int(index)}" in _armed()


def point(name: str, index: int | None = None) -> None:
    """Announce and pause at `name` of log interval `index` (default: the current) when
    the test environment arms it."""
    global current
    if name == "chunk" and index is not None:
        current = int(index)
    if ENV not in os.environ:
        return
    key = f"{name}:{current if index is None else int(index)}"
    secs = _armed().get(key)
    if secs is None:
        return
    print(f"[dreamerjax-test] at {key}", file=sys.stderr, flush=True)
    time.sleep(secs)
