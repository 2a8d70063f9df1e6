"""What a train() call may change in its process, and what may stop it from outside: one
frozen value, `Settings`, given as train(..., settings=...). The defaults change nothing;
`dreamerjax.cli_settings()` returns the command line's."""

from __future__ import annotations

import dataclasses
import os

from dreamerjax.run.guard import StopRequest


@dataclasses.dataclass(frozen=True)
class Settings:
    """compile_cache: a directory for jax.config's persistent compilation cache (True:
    the command line's, ~/.cache/dreamerjax/jax; None, the default, leaves jax.config
    alone). precompile: compile the run's programs before its first call
    (run/precompile.py): in a child process into the cache (needs it), so this process
    never holds XLA's compile peak, or in this process, all at once on threads, its calls
    then running those executables. precompile_here: where; None, the default, lets the
    backend choose (this process where its devices open in one process at a time, a TPU;
    else a child), True or False chooses this process or a child. malloc_trim: hand
    glibc's freed heap back after compiles and before each chunk. None of these changes a
    number of the run. stop: a StopRequest that asks the run to
    stop at its next safe point (the command line's SIGTERM / SIGINT handler holds one).
    marks: (name, time.time()) of moments before the call that its run_dir/timing.json
    lists (run/host_time.Timeline; the command line's `jax_ready` and `plan`)."""

    compile_cache: bool | str | os.PathLike | None = None
    precompile: bool = False
    precompile_here: bool | None = None
    malloc_trim: bool = False
    stop: StopRequest | None = None
    marks: tuple[tuple[str, float], ...] = ()
