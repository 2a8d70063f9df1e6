"""One writer per run directory (dreamerjax/run/lock.py), without training: a second
process is refused while the lock is held, the holder re-enters, and a dead owner's lock
is taken over with a warning naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from dreamerjax.run import lock

_OTHER = """
import sys
from dreamerjax.run import lock
try:
    lock.{call}(sys.argv[1], "--out")
except lock.RunLocked as e:
    print(e)
    sys.exit(3)
print("taken")
"""


def _other_process(call: str, run_dir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _OTHER.format(call=call), str(run_dir)],
                          capture_output=True, text=True, check=False,
                          env=os.environ | {"PYTHONPATH": os.getcwd()})


def test_second_process_refused_while_held_and_reentry(tmp_path):
    run = tmp_path / "run"
    lock.acquire(run)
    try:
        owner = lock.read_owner(run)
        assert (owner["pid"], owner["argv"]) == (os.getpid(), sys.argv)
        for call in ("acquire", "check"):
            proc = _other_process(call, run)
            assert proc.returncode == 3, proc.stdout + proc.stderr
            assert proc.stdout.startswith(f"--out {run}: the run is being written by pid "
                                          f"{os.getpid()} on host")
        lock.acquire(run)  # re-entrant in the holding process
        lock.release(run)
        assert (run / lock.LOCK_FILE).exists()  # one hold left
    finally:
        lock.release(run)
    assert not (run / lock.LOCK_FILE).exists()
    assert _other_process("acquire", run).stdout.strip() == "taken"  # free again


def test_stale_lock_of_a_dead_process_taken_over_with_a_warning(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    run = tmp_path / "run"
    run.mkdir()
    (run / lock.LOCK_FILE).write_text(json.dumps(
        {"pid": pid, "host": "elsewhere", "since": time.time(), "argv": []}))
    warnings = []
    lock.acquire(run, "--resume", warnings.append)
    try:
        assert lock.read_owner(run)["pid"] == os.getpid()
    finally:
        lock.release(run)
    assert len(warnings) == 1 and f"took over the stale lock of pid {pid} on host " \
        "elsewhere" in warnings[0]
    assert not (run / lock.LOCK_FILE).exists()
    lock.check(run)  # nothing held: no error

