"""One run directory, one writer: run_dir/lock holds the writing process's pid and host.

The lock is an exclusive flock on run_dir/lock, held open for as long as the process
writes the directory; the kernel drops it when the process dies, however it dies, so a
lock left by a killed run is recognised as stale (flock succeeds) and taken over with a
warning naming its old owner. The file's JSON says who holds it, for the refusal message.
A lock whose owner is on another host cannot be probed from here: when flock cannot tell
(a file system without locks), a live pid on this host or any owner on another host is
refused, with the file to remove if that owner is gone.

Re-entrant within a process: the CLI takes the lock before building anything, and
guard.guarded (around driver.train, which the Python API calls directly) takes it again
without conflict.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

LOCK_FILE = "lock"

_held: dict[str, tuple[int, int]] = {}  # realpath -> (fd, depth)


class RunLocked(ValueError):
    """The run directory is being written by another live process."""


def _owner_text(owner: dict) -> str:
    since = owner.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if since else "?"
    return f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')} (since {when})"


def read_owner(run_dir: str | os.PathLike) -> dict | None:
    """The lock file's owner record, or None when there is no (readable) lock file."""
    try:
        owner = json.loads((Path(run_dir) / LOCK_FILE).read_text())
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check(run_dir: str | os.PathLike, flag: str = "--resume") -> None:
    """Raise RunLocked when a live process holds run_dir's lock (writes nothing)."""
    path = Path(run_dir) / LOCK_FILE
    if not path.exists() or os.path.realpath(run_dir) in _held:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _locked_by_other(run_dir, run_dir, flag) from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class RunDirNotEmpty(ValueError):
    """A new run was given a directory that already holds files (a run, or anything
    else): writing there would mix its records and checkpoints with theirs."""


def check_new(run_dir: str | os.PathLike, flag: str = "out",
              resume: str = "resume=True") -> None:
    """Raise unless run_dir can take a new run: missing, or an empty directory. Reads only
    (makes and writes nothing). A run another live process writes is named as such
    (RunLocked); any other non-empty directory is RunDirNotEmpty. flag and resume are how
    the caller spells the directory's argument and a resume (the command line: "--out"
    and "--resume DIR")."""
    path = Path(run_dir)
    if path.exists() and not path.is_dir():
        raise RunDirNotEmpty(f"{flag} {path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        check(path, flag)
        raise RunDirNotEmpty(f"{flag} {path} exists and is not empty; continue that run "
                             f"with {resume}, or choose another {flag}")


def acquire(run_dir: str | os.PathLike, flag: str = "--resume", warn=None) -> None:
    """Take run_dir's lock for this process (creating run_dir); RunLocked if another
    live process holds it. A stale lock is taken over with a one-line warning."""
    warn = warn or (lambda msg: print(msg, file=sys.stderr))
    key = os.path.realpath(run_dir)
    if key in _held:
        fd, depth = _held[key]
        _held[key] = (fd, depth + 1)
        return
    os.makedirs(key, exist_ok=True)
    path = os.path.join(key, LOCK_FILE)
    fd = _lock_file(key, path, run_dir, flag)
    _held[key] = (_write_owner(key, path, fd, run_dir, flag, warn), 1)


def _locked_by_other(key, run_dir, flag: str) -> RunLocked:
    """The error for a run whose lock a live process holds (its owner record named)."""
    owner = read_owner(key) or {}
    return RunLocked(
        f"{flag} {run_dir}: the run is being written by {_owner_text(owner)}; one "
        "writer per run directory (wait for it, or stop it first)")


def _lock_file(key: str, path: str, run_dir, flag: str) -> int | None:
    """An exclusive flock on the lock file: its fd, or None where the file system has no
    flock (the owner record decides then); RunLocked when another process holds it."""
    for _ in range(10):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _locked_by_other(key, run_dir, flag) from None
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            return None  # no flock on this file system: fall back on the owner record
        # The holder may have removed the file between our open and flock: retry on
        # the new file then, or two processes would hold locks on different inodes.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
    # A lock file replaced ten times in a row.
    raise RunLocked(f"{flag} {run_dir}: cannot take {path}: it keeps being replaced")


def _write_owner(key: str, path: str, fd: int | None, run_dir, flag: str, warn) -> int:
    """Record this process as the owner (taking over a stale owner with a warning); the
    fd to hold, -1 where the file system has no flock."""
    owner = read_owner(key)
    me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
          "argv": sys.argv}
    if owner and (owner.get("pid"), owner.get("host")) != (me["pid"], me["host"]):
        if fd is None and (owner.get("host") != me["host"]
                           or _pid_alive(int(owner.get("pid", 0)))):
            raise RunLocked(
                f"{flag} {run_dir}: the run is being written by {_owner_text(owner)} "
                f"(this file system has no locks to tell whether it is alive); remove "
                f"{path} if that process is gone")
        warn(f"dreamerjax: warning: took over the stale lock of {_owner_text(owner)} "
             f"in {run_dir} (that process is gone)")
    data = (json.dumps(me) + "\n").encode()
    if fd is None:
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return -1
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    return fd


def release(run_dir: str | os.PathLike) -> None:
    """Drop one hold of run_dir's lock; the last removes the file and unlocks it."""
    key = os.path.realpath(run_dir)
    if key not in _held:
        return
    fd, depth = _held[key]
    if depth > 1:
        _held[key] = (fd, depth - 1)
        return
    del _held[key]
    with contextlib.suppress(OSError):
        os.remove(os.path.join(key, LOCK_FILE))  # while still locked: no one sees it free
    if fd >= 0:
        os.close(fd)


# ---------------------------------------------------------------------------------------
# A run that stopped at a non-finite loss may not continue as it is.

NONFINITE_FILE = "nonfinite_stop.json"


def write_nonfinite_stop(run_dir: str | os.PathLike, info: dict) -> Path:
    """Mark run_dir as stopped by a non-finite loss (update, rows, seeds, last good
    checkpoint): `--resume` refuses it until the file is removed."""
    path = Path(run_dir) / NONFINITE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(info, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def check_not_nonfinite(run_dir: str | os.PathLike, flag: str = "--resume") -> None:
    """ValueError when run_dir stopped at a non-finite loss: resuming its last good
    checkpoint repeats the same numbers (every key and batch is seeded) into the same
    loss, so it is refused with that checkpoint named."""
    path = Path(run_dir) / NONFINITE_FILE
    if not path.exists():
        return
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        info = {}
    good = info.get("last_good_checkpoint")
    where = (f"its last good checkpoint is {Path(run_dir) / 'checkpoints' / str(good)} "
             f"(row {info.get('last_good_rows')})" if good is not None
             else "it has no checkpoint before the loss")
    raise ValueError(
        f"{flag} {run_dir}: the run stopped at a non-finite loss at update "
        f"{info.get('update', '?')} (row {info.get('rows', '?')}, seeds "
        f"{info.get('seeds', '?')}); {where}. Resuming it would repeat the same numbers "
        f"into the same loss: start a new run with other settings, or remove {path} to "
        "resume anyway")
