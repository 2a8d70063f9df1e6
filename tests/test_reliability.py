"""Nothing lost, whatever happens: `dreamerjax train` killed at seeded random
moments and resumed, stopped by SIGINT / SIGTERM, a second writer, a damaged checkpoint,
a full disk and a non-finite loss, all in one story of the tests' small 240-row run
(tests/_runs.py: updates 0 / 15 / 55 at its three log points, rows 80 / 160 / 240),
compared at the end with the same run left whole.

Every process shares the session's compilation cache (XDG_CACHE_HOME, conftest.py), so at
most the first compiles. The kills land in chosen windows through tests/_failpoints.py's
pause points; the moment within a window (a chunk running, orbax writing) is drawn from a
seeded RNG.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import _failpoints
import numpy as np
import pytest
from _runs import read_scalars, small_argv, without_timing

from dreamerjax.run import checkpoint, records
from dreamerjax.run import lock as runlock
from dreamerjax.tools import cli

ROOT = Path(__file__).resolve().parents[1]
# One seed (the CLI's default); log points at rows 80, 160, 240. No open-loop reports: they
# are a picture per log point (tests/test_driver.py and tests/test_outputs.py check them),
# ~3 s of each of the story's processes, and no window of the story is inside one.
RUN = [*small_argv(), "--report-every", "0"]
TIMEOUT = 600  # seconds one process may take before the test gives up on it

# One step: what to do to the process (kill: SIGKILL; sigint / sigterm; none: let it end),
# the pause point armed in it (tests/_failpoints.py), the marker to wait for, the seconds
# to wait after it (a seeded uniform draw in [0, jitter)) and the fault injected into it
# (INJECT).
# The kills cover a chunk running (and loading its compiled program), a records write
# (episodes written, records torn half-way), the TensorBoard write, orbax writing a
# checkpoint (its temporary directory on disk) and the gap between orbax's commit and our
# manifest.
# A chunk of the small run can end within the jitter (interval 2's 40 updates take a
# fraction of a second on a fast machine), so a signal aimed at a chunk also arms a guard:
# a pause at the same interval's records (after its evaluation, before its checkpoint)
# longer than the jitter. The signal still lands at the seeded moment after the chunk
# started, and never after the interval's checkpoint, which every assertion relies on.
# second: at the pause, before the kill, a second writer (a resume, and a new run into the
# same directory) is started and must be refused: during a records write, during orbax's
# save and between orbax's commit and the manifest.
def _step(act, pause="", jitter=0.0, inject="", wait=None, second=False):
    wait = wait if wait is not None else pause.split("=")[0]
    if pause.startswith("chunk:"):
        index = pause.split("=")[0].split(":")[1]
        pause += f",records:{index}={jitter + 2.0}"
    return {"act": act, "pause": pause, "jitter": jitter, "inject": inject, "wait": wait,
            "second": second}


STORY = [
    _step("kill", "chunk:0=0", 1.0),  # no checkpoint yet: resumes from scratch
    _step("kill", "records_line:0", second=True),  # ... with a torn records line on disk
    _step("kill", "tensorboard:0"),
    _step("kill", inject="orbax_pause", wait="orbax", second=True),  # orbax writing ckpt 0
    _step("sigint", "chunk:0=0", 0.5),  # Ctrl-C: stops after checkpoint 0
    _step("none", inject="enospc_records"),  # full disk at log point 1's records
    _step("none", inject="enospc_checkpoint"),  # full disk while orbax writes
    _step("kill", inject="orbax_pause", wait="orbax"),  # orbax writing checkpoint 1
    _step("kill", "manifest:1", second=True),  # checkpoint 1 committed, no manifest yet
    _step("kill", "chunk:2=0", 1.0),  # checkpoint 1 is incomplete: resumes from 0
    _step("kill", "records_line:2"),
    _step("corrupt"),  # a byte of checkpoint 1's state flipped on disk
    _step("none", inject="nan"),  # resumes from 0; a non-finite loss at log point 1
    _step("sigterm", "chunk:2=0", 1.0),  # stops after the last checkpoint: the run is done
]

# Faults injected by the child itself (a real monkeypatch of the write or check).
INJECT = {
    "enospc_records": """
import errno, os
from dreamerjax.run import records
real = records._fsync_append
def full(path, lines):
    if path.name == records.RECORDS_FILE and '"rows": 160' in lines[0]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return real(path, lines)
records._fsync_append = full
""",
    "enospc_checkpoint": """
import errno, os
import orbax.checkpoint as ocp
async def full(self, *args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "checkpoints/1/meta")
ocp.JsonCheckpointHandler.async_save = full
""",
    "orbax_pause": """
import time
import orbax.checkpoint as ocp
async def slow(self, *args, **kwargs):
    print("[dreamerjax-test] at orbax", file=sys.stderr, flush=True)
    time.sleep(600)
ocp.JsonCheckpointHandler.async_save = slow
""",
    "nan": """
import numpy as np
from dreamerjax.run import driver
real = driver._check_finite
def poisoned(bad, seeds, rows, out):
    if rows == 160:
        bad = np.full_like(np.asarray(bad), 7)
    return real(bad, seeds, rows, out)
driver._check_finite = poisoned
""",
}
LAUNCH = ("import sys\nsys.path.insert(0, {tests!r})\nimport _failpoints\n_failpoints.install()\n"
          "{inject}\nfrom dreamerjax.tools import cli\nsys.exit(cli.main(sys.argv[1:]))\n")


class Proc:
    """A `dreamerjax train` child whose stderr is collected line by line."""

    def __init__(self, argv, env, inject: str = ""):
        code = LAUNCH.format(inject=inject, tests=str(Path(__file__).parent))
        self.popen = subprocess.Popen(
            [sys.executable, "-c", code, "train", *argv], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.stdout = ""
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.popen.stderr:  # universal newlines: tqdm's \r ends a line too
            with self._seen:
                self.lines.append(line.rstrip("\n"))
                self._seen.notify_all()

    def wait_for(self, text: str, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with self._seen:
            while not any(text in line for line in self.lines):
                if self.popen.poll() is not None:
                    self._seen.wait(0.5)  # the last lines may still be in the pipe
                    if not any(text in line for line in self.lines):
                        raise AssertionError(f"exited {self.popen.returncode} before "
                                             f"{text!r}:\n" + self.text())
                    return
                left = deadline - time.monotonic()
                assert left > 0, f"no {text!r} within {timeout} s:\n" + self.text()
                self._seen.wait(min(left, 1.0))

    def finish(self, timeout: float = TIMEOUT) -> int:
        # Not communicate(): it would read stderr too, away from the reader thread.
        self.stdout = self.popen.stdout.read()
        self.popen.wait(timeout=timeout)
        self._reader.join(30)
        return self.popen.returncode

    def text(self) -> str:
        return "\n".join(self.lines)


def _env(pause: str = "") -> dict:
    # XDG_CACHE_HOME stays the session's (conftest.py): the children share its cache.
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop(_failpoints.ENV, None)
    if pause:
        env[_failpoints.ENV] = pause
    return env


def _quick(argv) -> subprocess.CompletedProcess:
    """A CLI call expected to be refused before anything is built, run in this process:
    the refusals read the run directory's lock and markers only (no JAX), which holds
    for a second process just as for this one, without a process's ~3 s of imports."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(["train", *argv])
    return subprocess.CompletedProcess(["dreamerjax", "train", *argv], code, "",
                                       err.getvalue())


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    errors = [line for line in lines if line.startswith("dreamerjax train: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def _state_file(run_dir: Path, index: int) -> Path:
    files = [p for p in (run_dir / "checkpoints" / str(index) / "state").rglob("*")
             if p.is_file()]
    return max(files, key=lambda p: p.stat().st_size)


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """Runs the whole run, then STORY on a second directory; returns what happened."""
    base = tmp_path_factory.mktemp("reliability")
    whole, run = base / "whole", base / "run"
    proc = Proc([*RUN, "--out", str(whole)], _env())
    assert proc.finish() == 0, proc.text()
    rng = random.Random(18)
    log = {"kills": 0, "resumes": 0, "events": [], "whole": whole, "run": run}
    first = True
    for step in STORY:
        argv = [*RUN, "--out", str(run)] if first else ["--resume", str(run)]
        event = dict(step)
        log["events"].append(event)
        if step["act"] == "corrupt":
            target = _state_file(run, 1)
            data = bytearray(target.read_bytes())
            data[len(data) // 2] ^= 0xFF
            target.write_bytes(bytes(data))
            continue
        lock = run / runlock.LOCK_FILE
        event["lock_before"] = lock.read_text() if lock.exists() else None
        proc = Proc(argv, _env(step["pause"]), INJECT.get(step["inject"], ""))
        event["pid"] = proc.popen.pid
        log["resumes"] += not first
        first = False
        if step["wait"]:
            proc.wait_for(f"[dreamerjax-test] at {step['wait']}")
            if step["second"]:
                # A live writer paused in the middle of a write: a second one is refused.
                event["second_resume"] = _quick(["--resume", str(run)])
                event["second_out"] = _quick([*RUN, "--out", str(run)])
            time.sleep(rng.uniform(0, step["jitter"]))
            sig = {"kill": signal.SIGKILL, "sigint": signal.SIGINT,
                   "sigterm": signal.SIGTERM}[step["act"]]
            proc.popen.send_signal(sig)
            log["kills"] += step["act"] == "kill"
        event["rc"] = proc.finish()
        event["stderr"] = proc.text()
        event["checkpoints"] = checkpoint.indices(run)
        event["partial"] = sorted(p.name for p in (run / "checkpoints").glob("*tmp*")) \
            if (run / "checkpoints").exists() else []
        if step["inject"] == "nan":
            event["refused"] = _quick(["--resume", str(run)])
            (run / runlock.NONFINITE_FILE).unlink()  # the documented way to retry anyway
    return log


def _events(story, key, value):
    return [e for e in story["events"] if e[key] == value]


def test_killed_and_resumed_run_equals_the_whole_run(story):
    whole, run = story["whole"], story["run"]
    print(json.dumps({"kills": story["kills"], "resumes": story["resumes"],
                      "records": len(records.read_records(run)),
                      "episodes": len(records.read_episodes(run)),
                      "scalars": sum(map(len, read_scalars(run).values()))}))
    assert story["kills"] >= 8

    def strip(recs):
        return [without_timing(r) for r in recs]

    a, b = records.read_records(whole), records.read_records(run)
    # Log points every 80 rows; the gate opens at row 132, so none at row 80, then one
    # update per 2 rows after it: 1 + (160 - 132) // 2 = 15, 1 + (240 - 132) // 2 = 55.
    assert [r["rows"] for r in b] == [80, 160, 240]
    assert [r["updates"] for r in b] == [0, 15, 55]
    assert strip(a) == strip(b)
    assert records.read_episodes(whole) == records.read_episodes(run)
    # no torn line anywhere: every line of both files parses
    for name in (records.RECORDS_FILE, records.EPISODES_FILE):
        text = (run / name).read_text()
        assert text.endswith("\n")
        assert all(json.loads(line) for line in text.splitlines())
    sa, sb = read_scalars(whole), read_scalars(run)
    assert sa.keys() == sb.keys() == {0}
    keys = [(tag, step) for tag, step, _ in sb[0]]
    assert len(keys) == len(set(keys)), "a duplicate TensorBoard point"
    assert {step for _, step in keys} == {80, 160, 240}, "a gap"
    assert sorted(sa[0]) == sorted(sb[0])


def test_final_state_is_bitwise_equal(story):
    import jax

    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.resume import load_state
    from dreamerjax.run.trainers import make_trainer

    config, seeds = records.read_run_config(story["whole"])
    whole, resumed = (checkpoint.latest_verified(story[k])[0] for k in ("whole", "run"))
    assert whole == resumed == 2
    trainer = make_trainer(make_plan(config, seeds))
    # the checkpoint's state and the replay's ring rebuilt from the run's replay files
    a, b = (load_state(trainer, str(story[k]), 2, checkpoint.read_meta(story[k], 2))
            for k in ("whole", "run"))

    def data(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x)

    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b) > 10
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert data(x).dtype == data(y).dtype and data(x).shape == data(y).shape
        assert data(x).tobytes() == data(y).tobytes()


def test_kills_before_the_first_checkpoint_resume_from_scratch(story):
    events = story["events"]
    assert [e["checkpoints"] for e in events[:4]] == [[], [], [], []]
    assert events[3]["partial"], "the kill inside orbax's save left its temporary directory"
    assert events[4]["checkpoints"] == [0]  # the next save cleared it
    # the process after a killed one takes over its stale lock, naming it
    procs = [e for e in events if e["act"] != "corrupt"]
    for killed, nxt in zip(procs, procs[1:], strict=False):
        if killed["act"] == "kill":
            assert f"took over the stale lock of pid {killed['pid']}" in nxt["stderr"], (
                killed["rc"], nxt["lock_before"], nxt["stderr"][:2000])


def test_a_live_writer_refuses_a_second_one(story):
    checked = [e for e in story["events"] if "second_resume" in e]
    assert len(checked) == 3
    for e in checked:
        for key in ("second_resume", "second_out"):
            result = e[key]
            assert result.returncode == 2, result.stderr
            line = _one_error_line(result.stderr)
            assert f"being written by pid {e['pid']} on host" in line, line


def test_sigint_and_sigterm_stop_after_a_checkpoint(story):
    (sigint,) = _events(story, "act", "sigint")
    assert sigint["rc"] == 128 + signal.SIGINT, sigint["stderr"]
    assert sigint["checkpoints"] == [0]
    assert "SIGINT: stopped at row 80 after its checkpoint; continue with: " \
           f"dreamerjax train --resume {story['run']}" in sigint["stderr"]
    (sigterm,) = _events(story, "act", "sigterm")
    assert sigterm["rc"] == 128 + signal.SIGTERM, sigterm["stderr"]
    assert "SIGTERM: stopped at row 240 after its checkpoint" in sigterm["stderr"]
    assert 2 in sigterm["checkpoints"]
    assert "Traceback" not in sigint["stderr"] + sigterm["stderr"]


def test_damaged_checkpoints_fall_back_to_the_previous(story):
    events = story["events"]
    after_manifest_kill = next(e for e in events if e["pause"].startswith("chunk:2=0"))
    assert "checkpoint 1 of" in after_manifest_kill["stderr"]
    assert "damaged (its save did not finish" in after_manifest_kill["stderr"]
    assert "resuming from checkpoint 0" in after_manifest_kill["stderr"]
    (after_corrupt,) = _events(story, "inject", "nan")
    assert "does not match its sha256" in after_corrupt["stderr"]
    assert "resuming from checkpoint 0" in after_corrupt["stderr"]
    damaged = sorted((story["run"] / checkpoint.DAMAGED_DIR).iterdir())
    assert [p.name.split("-")[0] for p in damaged] == ["1", "1"]


def test_a_full_disk_stops_with_the_reason_and_keeps_the_last_checkpoint(story):
    full = _events(story, "inject", "enospc_records") + \
        _events(story, "inject", "enospc_checkpoint")
    assert len(full) == 2
    for event in full:
        assert event["rc"] == 4, event["stderr"]
        line = _one_error_line(event["stderr"])
        assert "No space left on device" in line
        assert "last good checkpoint is" in line and "(row 80)" in line
        assert f"dreamerjax train --resume {story['run']}" in line
        assert event["checkpoints"] == [0] and event["partial"] == []


def test_a_nonfinite_loss_stops_and_resume_refuses_it(story):
    (nan,) = _events(story, "inject", "nan")
    assert nan["rc"] == 3, nan["stderr"]
    line = _one_error_line(nan["stderr"])
    # INJECT["nan"] names update 7 at log point 1 (row 160), one of its updates 0..14
    assert "non-finite loss at update 7" in line and "stopped at row 160" in line
    assert "last good checkpoint is" in line and "(row 80)" in line
    refused = nan["refused"]
    assert refused.returncode == 2
    line = _one_error_line(refused.stderr)
    assert "stopped at a non-finite loss at update 7" in line
    assert f"its last good checkpoint is {story['run'] / 'checkpoints' / '0'}" in line
    assert runlock.NONFINITE_FILE in line


def test_pause_points_are_inert_without_the_variable(monkeypatch):
    monkeypatch.delenv(_failpoints.ENV, raising=False)
    t = time.monotonic()
    _failpoints.point("records", 0)
    assert not _failpoints.armed("records", 0)
    assert time.monotonic() - t < 0.1
    monkeypatch.setenv(_failpoints.ENV, "records:3=0,chunk:1=0.01")
    assert _failpoints.armed("records", 3) and not _failpoints.armed("records", 2)
    _failpoints.point("chunk", 1)
    assert _failpoints.current == 1 and _failpoints.armed("chunk")


def test_cleanup_leaves_no_lock(story):
    assert not (story["run"] / runlock.LOCK_FILE).exists()
    assert not (story["whole"] / runlock.LOCK_FILE).exists()
