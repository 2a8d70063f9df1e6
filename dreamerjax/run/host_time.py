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
    checkpoint  the previous log point's checkpoint (0 when none was saved), and within
                it: checkpoint_replay (the replay's chunk and latent files brought up to
                it), checkpoint_state (the state's save and its manifest) and
                checkpoint_tidy (the kept checkpoints' metas read, latent files that none
                of them lists removed)

`write` and `checkpoint` come after a log point's records are written (the checkpoint
stores how far those files go), so they count in the next record; what follows the last
log point (its write, its checkpoint, the plots) is printed when the run ends. The seeds
of a log point share one process, so their `host_s` is the same. `wall_s` is read at the
same moment, so the phases of a record (checkpoint's parts counted once, in checkpoint)
sum to at most its `wall_s` less the previous record's.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

PHASES = ("chunk", "evaluate", "callbacks", "report", "write", "checkpoint")
# checkpoint's parts, seconds within it (driver._checkpoint): the replay files brought up
# to it, the state saved with its manifest, the kept checkpoints' metas read and the latent
# files none lists removed
CHECKPOINT_PARTS = ("checkpoint_replay", "checkpoint_state", "checkpoint_tidy")
TAIL_PHASES = ("write", "checkpoint", "plots")  # what follows the last log point


class Phases:
    """Seconds per phase since the last take(): `with phases("report"): ...`."""

    def __init__(self) -> None:
        self._seconds = dict.fromkeys(PHASES + CHECKPOINT_PARTS, 0.0)

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
        self._seconds = dict.fromkeys(PHASES + CHECKPOINT_PARTS, 0.0)
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
        self.total = 0.0  # every second seen while entered, take() or not
        self._lock = threading.Lock()

    def _listener(self, event: str, duration: float, **_) -> None:
        if event.startswith(COMPILE_EVENTS) and event.endswith("_duration"):
            with self._lock:
                self._seconds += duration
                self.total += duration

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



# ----------------------------------------------------------------------------- timing.json

TIMING_FILE = "timing.json"
# The moments a train() call marks, in their order (a Timeline's marks; `start`, `jax_ready`
# and `plan` come from the caller where it knows them, as the command line does).
MARKS = ("start", "jax_ready", "plan", "train", "compile_start", "programs_ready",
         "first_log_point", "last_log_point", "end")


def process_age() -> float | None:
    """Seconds since this process started (Linux's /proc: its start in clock ticks since
    boot against the boot clock, 10 ms steps), None where that is not known."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime, field 22 of proc(5)
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Timeline:
    """When a train() call reached each of its moments (MARKS; time.time()), written to
    run_dir/timing.json at its end: where a run's wall time goes outside its log
    intervals (start-up, compile, the end), which the records' host_s does not cover.

    marks: (name, time.time()) of moments before train() was called (the command line's
    `jax_ready`: JAX imported and its backend up; `plan`: the run's plan made). `start`
    is the process's start where known (process_age), else train()'s call."""

    def __init__(self, marks: Sequence[tuple[str, float]] = ()) -> None:
        now = time.time()
        age = process_age()
        self.marks: dict[str, float] = {"start": now - age if age is not None else now}
        self.marks.update(dict(marks))
        self.marks["train"] = now

    def mark(self, name: str, once: bool = False) -> None:
        """Now is `name` (once: only the first time, e.g. the first log point)."""
        if not (once and name in self.marks):
            self.marks[name] = time.time()

    def seconds(self) -> dict[str, float]:
        """Each moment's seconds since `start`, in MARKS's order."""
        t0 = self.marks["start"]
        known = [m for m in MARKS if m in self.marks]
        return {m: round(self.marks[m] - t0, 3) for m in known}

    def write(self, out: str | os.PathLike, records: Sequence[Mapping] = (),
              compile_s: float = 0.0) -> str:
        """run_dir/timing.json: the moments (seconds since the process started, `start`'s
        epoch as `started`) and the phases between them; records: this call's records of
        one seed, whose host_s give the log intervals' chunk and evaluation seconds, of
        which compile_s (CompileClock) were spent making programs."""
        at = self.seconds()
        chunk = sum(r.get("host_s", {}).get("chunk", 0.0) for r in records)
        evaluate = sum(r.get("host_s", {}).get("evaluate", 0.0) for r in records)
        phases = {"start_up": at.get("compile_start"),
                  "compile": None if "programs_ready" not in at else round(
                      at["programs_ready"] - at["compile_start"], 3),
                  "compile_in_log_intervals": round(compile_s, 3),
                  "chunks": round(chunk, 3), "evaluation": round(evaluate, 3),
                  "end": None if "last_log_point" not in at else round(
                      at["end"] - at["last_log_point"], 3)}
        path = os.path.join(out, TIMING_FILE)
        with open(path, "w") as f:
            json.dump({"started": self.marks["start"], "seconds": at, "phases": phases}, f,
                      indent=1)
            f.write("\n")
        return path
