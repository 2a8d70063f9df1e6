"""Named points of a `dreamerjax train` child where the reliability tests pause it, to kill
it inside a window. Test machinery: installed into the child by the test's launch code
(`_failpoints.install()` before the command line runs), never part of the package.

    DREAMERJAX_TEST_PAUSE="records_line:1,checkpoint:0=0.2,chunk:2=0"

arms `name:log_index[=seconds]` points (default 600 s). At an armed point the process
prints `[dreamerjax-test] at NAME:INDEX` to stderr and sleeps. Each point wraps the
package function at whose start (or inside whose write) the window lies:

    chunk         before a log interval's chunk runs (the trainers' chunk)
    records       episodes written, records not yet (RunWriter.add_records)
    records_line  half of the records' text written and fsynced: a torn line on disk
    tensorboard   records written, scalars not yet (the interval's first add_scalars)
    checkpoint    before the checkpoint's save starts (checkpoint.save)
    manifest      orbax committed, its manifest not yet written (checkpoint.write_manifest)
    stopped       after a SIGTERM/SIGINT stop's last checkpoint (status.say_stopped)
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

ENV = "DREAMERJAX_TEST_PAUSE"
DEFAULT_S = 600.0

current = -1  # the log index of the interval being run (set at the chunk point)


def armed_points() -> dict[str, float]:
    out = {}
    for item in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(","))):
        name, _, secs = item.partition("=")
        out[name] = float(secs) if secs else DEFAULT_S
    return out


def armed(name: str, index: int | None = None) -> bool:
    return f"{name}:{current if index is None else int(index)}" in armed_points()


def point(name: str, index: int | None = None) -> None:
    """Announce and pause at `name` of log interval `index` (default: the current) when
    the variable arms it."""
    global current
    if name == "chunk" and index is not None:
        current = int(index)
    key = f"{name}:{current if index is None else int(index)}"
    secs = armed_points().get(key)
    if secs is None:
        return
    print(f"[dreamerjax-test] at {key}", file=sys.stderr, flush=True)
    time.sleep(secs)


def _before(owner, attr: str, at) -> None:
    """Wrap owner.attr so that `at(*args)` runs first."""
    real = getattr(owner, attr)

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        at(*args, **kwargs)
        return real(*args, **kwargs)

    setattr(owner, attr, wrapper)


def _torn_append(records, real):
    """records._fsync_append that stops half-way through the records' text when armed."""

    def append(path: Path, lines: list[str]) -> None:
        if Path(path).name != records.RECORDS_FILE or not lines or not armed("records_line"):
            return real(path, lines)
        text = "".join(line + "\n" for line in lines)
        with open(path, "a", encoding="utf-8") as f:
            f.write(text[:len(text) // 2])
            f.flush()
            os.fsync(f.fileno())
            point("records_line")
            f.write(text[len(text) // 2:])
            f.flush()
            os.fsync(f.fileno())

    return append


def install() -> None:
    """Arm the points in this process (the child's launch code calls it)."""
    from dreamerjax.run import checkpoint, records, status, trainers

    for cls in (trainers.CompiledTrainer, trainers.HostTrainer):
        _before(cls, "chunk", lambda self, states, log_index: point("chunk", log_index))
    _before(records.RunWriter, "add_records", lambda self, rows: point("records"))
    paused = set()

    def tensorboard(self, *args, **kwargs):
        if current >= 0 and current not in paused:  # once per interval, not on a rebuild
            paused.add(current)
            point("tensorboard")

    _before(records.RunWriter, "add_scalars", tensorboard)
    records._fsync_append = _torn_append(records, records._fsync_append)
    _before(checkpoint, "save", lambda run_dir, index, *a, **k: point("checkpoint", index))
    _before(checkpoint, "write_manifest",
            lambda target, *a, **k: point("manifest", int(Path(target).name)))
    _before(status, "say_stopped", lambda *a, **k: point("stopped"))
