"""The path from `dreamerjax train` to the update, measured: a tiny CLI run (the small
CartPole run of tests/_runs.py, one seed, one log point) in this process with a profile
hook that, when agent.update is first entered (the chunk's trace), lists the frames of
dreamerjax's own files on the stack. docs/architecture.md ("From `main` to the first
update") states that path and its length; the test reads both from there, and fails when
the path grows past the documented count or differs from the documented path."""

import os
import re
import sys
import threading
from pathlib import Path

import jax
from _runs import small_argv

import dreamerjax
from dreamerjax.algo import agent as agent_lib
from dreamerjax.tools import cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
PACKAGE = os.path.dirname(dreamerjax.__file__) + os.sep


def documented_path() -> tuple[int, list[str]]:
    """(the count, the calls) of architecture.md's paragraph "From `main` to the first
    update, N calls: `a -> b -> ...`"."""
    text = " ".join(DOC.read_text().split())
    found = re.search(r"From `main` to the first update, (\d+) calls[^`]*`([^`]+)`", text)
    assert found, f"{DOC.name}: no paragraph 'From `main` to the first update, N calls'"
    return int(found.group(1)), [c.strip() for c in found.group(2).split("->")]


def _name(frame) -> str:
    """module.function of a frame (methods with their class; nested functions by their
    own name)."""
    module = Path(frame.f_code.co_filename).stem
    return f"{module}.{frame.f_code.co_qualname.split('.<locals>.')[-1]}"


def test_the_path_to_the_first_update_is_the_documented_one(tmp_path):
    count, calls = documented_path()
    assert count == len(calls), f"{DOC.name} says {count} calls and lists {len(calls)}"
    target, seen = agent_lib.update.__code__, []
    # A process that has traced this update already (another test's run of the same
    # config) takes its trace from JAX's caches without entering agent.update again.
    jax.clear_caches()

    def hook(frame, event, arg):
        if event == "call" and frame.f_code is target and not seen:
            stack = []
            while frame is not None:
                if frame.f_code.co_filename.startswith(PACKAGE):
                    stack.append(_name(frame))
                frame = frame.f_back
            seen.append(stack[::-1])

    threading.setprofile(hook)  # the chunk may be traced on a seed's thread
    sys.setprofile(hook)
    try:
        code = cli.main(["train", *small_argv(80), "--seeds", "0", "--out",
                         str(tmp_path / "run"), "--no-precompile"])
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert code == 0
    assert seen, "agent.update was never entered"
    path = seen[0]
    assert path[0] == "cli.main" and path[-1] == "agent.update", path
    assert len(path) <= count, (f"{len(path)} dreamerjax frames from main to the first "
                                f"update, {DOC.name} says {count}: {' -> '.join(path)}")
    assert path == calls, f"the measured path, for {DOC.name}: {' -> '.join(path)}"
