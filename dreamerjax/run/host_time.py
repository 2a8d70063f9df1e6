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
    video       the evaluation videos (run/videos.py); only in the records of log
                points with videos (run.video_every)
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
import sys
import threading
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


COMPILE_EVENTS = "/jax/core/compile/"  # tracing, lowering, XLA's compile or cache load


class CompileClock:
    """Seconds JAX spent making programs (tracing, lowering, compiling or loading them from
    the compilation cache: jax.monitoring's /jax/core/compile/*_duration events) while
    entered, since the last take(): a log interval's wall time less these is its
    training's, so the first interval's updates/s is not its compile's."""

    def __init__(self) -> None:
        self._seconds = 0.0
        self._lock = threading.Lock()

    def _listener(self, event: str, duration: float, **_) -> None:
        if event.startswith(COMPILE_EVENTS) and event.endswith("_duration"):
            with self._lock:
                self._seconds += duration

    def __enter__(self) -> CompileClock:
        import jax

        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc) -> None:
        import jax

        jax.monitoring.unregister_event_duration_listener(self._listener)

    def take(self) -> float:
        with self._lock:
            seconds, self._seconds = self._seconds, 0.0
        return seconds


class Heartbeat:
    """A line every `every_s` seconds on stderr while entered, saying what the run is doing
    (`say(...)` sets it) and for how long: progress where no bar is drawn (a notebook
    without widgets, a job's log file), since one log interval's chunk is one call that
    may take minutes, the first also the compile."""

    def __init__(self, every_s: float, enabled: bool = True) -> None:
        self.every_s, self.enabled = float(every_s), enabled
        self._what, self._since = "", time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def say(self, what: str) -> None:
        """Set what the run is doing now (the next line says it, with the time since)."""
        self._what, self._since = what, time.time()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            took = time.time() - self._since
            if self._what:
                print(f"[dreamerjax] {self._what} ({took:.0f} s so far)", file=sys.stderr,
                      flush=True)

    def __enter__(self) -> Heartbeat:
        if self.enabled:
            self._thread = threading.Thread(target=self._beat, name="dreamerjax-heartbeat",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

