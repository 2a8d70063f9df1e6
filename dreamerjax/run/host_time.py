"""Where a run's wall time goes between two log points: the `host_s` field of its records.

Every record (one per seed per log point) carries `host_s`, the seconds spent in each
phase of the driver since the previous log point's records were written, as the
reference's `timer/` statistics cover the span since its logger last wrote
(embodied/run/train.py at 29eb964):

    chunk       the log interval's chunk: acting, env steps and updates (the compiled
                program, or host envs stepped beside it), until its results are ready
    evaluate    the evaluation episodes and the log point's records assembled
    callbacks   the driver callbacks (the W&B and MLflow outputs, yours)
    report      the world model's open-loop report (pictures and TensorBoard images);
                0 at log points without one (run.report_every)
    write       the previous log point's records, episodes and TensorBoard scalars
    checkpoint  the previous log point's checkpoint (0 when none was saved)

`write` and `checkpoint` come after a log point's records are written (the checkpoint
stores how far those files go), so they count in the next record; what follows the last
log point (its write, its checkpoint, the plots) is printed when the run ends. The seeds
of a log point share one process, so their `host_s` is the same. `wall_s` is read at the
same moment, so the phases of a record sum to at most its `wall_s` less the previous
record's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping

PHASES = ("chunk", "evaluate", "callbacks", "report", "write", "checkpoint")
TAIL_PHASES = ("write", "checkpoint", "plots")  # what follows the last log point


class Phases:
    """Seconds per phase since the last take(): `with phases("report"): ...`."""

    def __init__(self) -> None:
        self._seconds = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[name] = self._seconds.get(name, 0.0) + time.perf_counter() - start

    def take(self) -> dict[str, float]:
        """The seconds gathered (rounded to ms), and a fresh start."""
        out = {k: round(v, 3) for k, v in self._seconds.items()}
        self._seconds = dict.fromkeys(PHASES, 0.0)
        return out


def stamp(records: list[dict], phases: Phases, wall_s: float) -> None:
    """Set `host_s` (the phases since the last stamp) and `wall_s` on a log point's
    records, just before they are written."""
    seconds = phases.take()
    for r in records:
        r["host_s"] = dict(seconds)
        r["wall_s"] = float(wall_s)


def tail_line(seconds: Mapping[str, float]) -> str:
    """The closing line of a run: what followed its last log point."""
    parts = ", ".join(f"{k} {seconds.get(k, 0.0):.1f} s" for k in TAIL_PHASES)
    return f"[dreamerjax] after the last log point: {parts}"
