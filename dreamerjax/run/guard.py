"""The guards of a run directory around train(): one writer at a time (run/lock.py), a
fresh run refused in a used directory, a failed write turned into WriteFailed naming the
last good checkpoint, a non-finite loss leaving a marker that --resume refuses; and the
StopRequest that stops a run at its next safe point."""

from __future__ import annotations

import contextlib
import errno
import os

import jax

from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import lock as runlock
from dreamerjax.run import status


class StopRequest:
    """Asks a running train() to stop at its next safe point: after the current log
    point's records and its checkpoint (saved then even off the checkpoint_every
    schedule). `request` is safe from a signal handler (the CLI's SIGTERM / SIGINT) or a
    callback; give the same object to train (run/settings.Settings(stop=...))."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def request(self, reason: str) -> None:
        self.reasons.append(reason)

    @property
    def reason(self) -> str | None:
        """The first reason a stop was requested, or None."""
        return self.reasons[0] if self.reasons else None


DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO,
                         errno.EFBIG, errno.EPERM})
DISK_WORDS = ("No space left", "Disk quota", "Read-only file system", "Permission denied",
              "Input/output error")


class WriteFailed(OSError):
    """A write of the run directory failed (a full disk, a quota, a read-only or
    unwritable directory): the run stopped, its last good checkpoint is intact."""


class NonFiniteLoss(FloatingPointError):
    """A loss turned NaN or inf: the run stops before that log point's records."""

    def __init__(self, message: str, update: int, seeds: list[int], rows: int):
        super().__init__(message)
        self.update, self.seeds, self.rows = update, seeds, rows


def _write_error(e: BaseException) -> BaseException | None:
    """The OSError (or a library's error quoting one) behind e, if e is a failed write."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            return e
        if any(w in str(e) for w in DISK_WORDS):
            return e
        e = e.__cause__ or e.__context__
    return None


def _last_good_text(out: str) -> str:
    try:
        found = ckpt.indices(out)
        index = found[-1] if found else None
        rows = ckpt.read_meta(out, index)["rows"] if index is not None else None
    except Exception:  # noqa: BLE001 - a report of what is left must not fail itself
        index = rows = None
    if index is None:
        return "it has no checkpoint yet (a --resume starts it again from row 0)", None, None
    return (f"its last good checkpoint is {os.path.join(out, ckpt.CHECKPOINT_DIR, str(index))}"
            f" (row {rows})"), index, rows


@contextlib.contextmanager
def guarded(out: str | os.PathLike, resume: bool):
    """The body of train() with its run directory's guards: one writer (runlock), a fresh
    run refused in a used directory, a failed write turned into WriteFailed naming the
    last good checkpoint, a non-finite loss leaving a marker that --resume refuses."""
    out, resume = str(out), bool(resume)
    primary = jax.process_index() == 0
    if resume:
        runlock.check_not_nonfinite(out)
    elif primary:  # the processes of a multi-host run share out; only process 0 writes
        # A fresh run into a used directory would append to its records and overwrite
        # its config, then fail at its first checkpoint: refused before anything is
        # built, compiled or written (the command line refuses with this same check).
        runlock.check_new(out)
    existed = os.path.exists(out)
    if primary:
        runlock.acquire(out, "--resume" if resume else "--out")
    try:
        yield
    except NonFiniteLoss as e:
        status.close_progress_bars()
        text, index, rows = _last_good_text(out)
        if primary:
            with contextlib.suppress(OSError):
                runlock.write_nonfinite_stop(out, {
                    "update": e.update, "rows": e.rows, "seeds": e.seeds,
                    "last_good_checkpoint": index, "last_good_rows": rows})
        raise NonFiniteLoss(
            f"non-finite loss at update {e.update} (seeds {e.seeds}); stopped at row "
            f"{e.rows}; {text}; --resume refuses this run (it would repeat the same "
            "loss)", e.update, e.seeds, e.rows) from e
    except Exception as e:
        status.close_progress_bars()
        cause = _write_error(e)
        if cause is None:
            raise
        text = _last_good_text(out)[0]
        raise WriteFailed(f"writing the run directory failed ({cause}); the run "
                          f"stopped; {text}: make room and continue with `dreamerjax "
                          f"train --resume {out}`") from e
    finally:
        if primary:
            runlock.release(out)
            if not existed:  # refused before writing (e.g. memory): leave no trace
                with contextlib.suppress(OSError):
                    os.rmdir(out)
