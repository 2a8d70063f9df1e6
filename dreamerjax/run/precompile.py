"""Compile a run's programs before its first call: in a short-lived child process, so the
training process loads them from the persistent compilation cache instead of compiling
them, or, where no child can open the devices, in the training process itself, all at
once, its trainer then calling the executables it compiled.

XLA's compile of the chunk (the update inside it) is the peak of a training process:
for the protocol's 1m CartPole run about 1.7 GiB, where the program itself needs about
350 MiB (results/bench/LOG.md, "Peak RSS of a training process"). A process never gives
that peak back, so driver.train (Settings(precompile=True)) first runs
`python -m dreamerjax.run.precompile` in a child: the child builds the same trainer,
lowers and compiles every jitted function of the run (init, chunk, evaluation, report)
with the run's shapes and shardings into the persistent cache, and exits. Meanwhile the
training process lowers the same programs itself (its share of the work, which it would
otherwise do at each program's first call) and imports what it needs later; once the
child has exited it loads each executable from the cache, and the trainer's calls then
trace, lower and compile nothing.

A TPU opens in one process at a time (EXCLUSIVE_BACKENDS), so no child can compile
there, and there the run compiles here (compile_here; Settings.precompile_here chooses
it on any backend): the training process lowers its own trainer's programs, the very
jitted functions it will call, with the run's shapes and shardings, one after another,
and compiles each on a thread as soon as it is lowered (XLA compiles outside Python's
lock), so the chunk's compile overlaps the others' and the driver's imports. The trainer
keeps the executables and calls them in place of its jitted functions
(trainers.AheadOfTime): its calls trace and compile nothing again, and nothing is looked
up in a cache. (An earlier way compiled a fresh trainer's programs into the cache; on
one TPU v5e chip the run's trainer then traced and compiled its own again, twice the
work: docs/performance.md, "On a TPU".) The compile peak is then this process's. What
it spares on the chip is to be measured there.

Nothing it does can change a result: the trainer runs the executables XLA compiled for
the very same programs, and where anything differs (another flag, another jax config, an
argument the executable refuses) the program compiles at its call as before. Skipped for
host envs (host_loop.py), for multi-process runs, for a child when the cache is off
(--no-compile-cache), and unless the caller asks for it (Settings(precompile=True); the
command line does, --no-precompile turns it off, --compile-here compiles here). A compile
that fails is reported on stderr and the run goes on.

The parent's backend is up before the child starts (the plan checks the run's devices),
and on a GPU JAX's client takes XLA_PYTHON_CLIENT_MEM_FRACTION (75 %) of every device as
it starts. The child runs on the same devices, so it is started with preallocation off
(CHILD_ENV, in its environment only): it takes what its compiles need (autotuning's
buffers) from the rest and gives it back as it exits.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

TRIM_AFTER_S = 0.5  # compiles (or cache loads) at least this long are followed by a trim

# The child's environment over the parent's: JAX's GPU client (CUDA and ROCm) takes memory
# as the child's compiles need it instead of a fraction of each device at its start, which
# the parent's backend already holds.
CHILD_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
# Backends whose devices one process opens at a time: a child could not start beside the
# parent's backend (libtpu refuses a TPU another process holds).
EXCLUSIVE_BACKENDS = ("tpu",)
GPU_BACKENDS = ("gpu", "cuda", "rocm")


def _programs(trainer, report: bool = True) -> dict:
    """The jitted functions of a trainers.CompiledTrainer with the arguments driver.train
    passes them (abstract: nothing is computed), by name, the chunk (the longest compile)
    first."""
    import jax
    import numpy as np

    keys = trainer._keys()
    states = trainer.abstract_state()
    programs = {"chunk": (trainer._chunk, trainer.chunk_input(states), trainer.owed(0)),
                "init": (trainer._init, keys),
                "eval": (trainer._eval, states.agent.params, keys, False)}
    if report:
        programs["report"] = (trainer._report, states, np.asarray(jax.random.PRNGKey(0)))
    return programs


def lower_programs(trainer, report: bool = True) -> dict:
    """Every program of a trainers.CompiledTrainer lowered (traced and turned into XLA's
    input), by name. JAX keeps what it lowered: the trainer's own calls with these shapes
    and shardings trace and lower nothing again, and once a lowered program is compiled
    (or loaded from the cache) they run that executable."""
    return {name: fn.lower(*args) for name, (fn, *args) in _programs(trainer, report).items()}


# Trailing static arguments of a program in _programs (the evaluation's mode), by name.
STATIC_ARGS = {"eval": 1}


def compile_programs(trainer, report: bool = True, workers: int = 1,
                     meanwhile: Callable[[], object] | None = None) -> tuple[dict, dict]:
    """Lower and compile every jitted function of a trainers.CompiledTrainer with the
    arguments driver.train passes them (abstract: nothing is computed). The programs are
    lowered one after another (tracing holds Python's lock), the chunk first, and with
    `workers` > 1 each is compiled by a thread as soon as it is lowered: XLA compiles
    outside that lock, so the chunk's compile (the longest) overlaps the others' tracing
    and compiles, and with cores to spare the run waits for it rather than for the sum.
    meanwhile: called once every program is lowered, while the threads compile.

    Returns (seconds per name, each compile's own; the executables by name, each a
    (jax.stages.Compiled, the static arguments it was compiled for) pair, as
    trainers.CompiledTrainer.use_executables takes them)."""
    programs = _programs(trainer, report)
    secs, executables = {}, {}

    def compile_one(name, lowered, static):
        t = time.perf_counter()
        executables[name] = (lowered.compile(), static)
        secs[name] = time.perf_counter() - t

    def lower(name, fn, *args):
        static = tuple(args[len(args) - STATIC_ARGS.get(name, 0):])
        return name, fn.lower(*args), static

    if workers > 1:
        with concurrent.futures.ThreadPoolExecutor(min(workers, len(programs))) as pool:
            futures = [pool.submit(compile_one, *lower(name, *program))
                       for name, program in programs.items()]
            if meanwhile is not None:
                meanwhile()
            for future in futures:
                future.result()
    else:
        for name, program in programs.items():
            compile_one(*lower(name, *program))
        if meanwhile is not None:
            meanwhile()
    return ({name: secs[name] for name in programs},
            {name: executables[name] for name in programs})


def compile_trainer(trainer, report: bool = True, workers: int = 1) -> dict:
    """compile_programs' seconds per name, the executables dropped (the persistent cache
    keeps them where it is on)."""
    return compile_programs(trainer, report, workers)[0]


def compile_here(trainer, report: bool = True,
                 meanwhile: Callable[[], object] | None = None) -> dict | None:
    """The run's own trainer's programs compiled in this process, compile_workers()
    threads at once (compile_programs), and handed to it: its calls then run these
    executables and trace, lower and compile nothing (use_executables). Returns the
    figures (seconds per function, wall seconds), or None when a compile failed (the
    trainer then compiles each program at its first call, as without this)."""
    t = time.perf_counter()
    try:
        secs, executables = compile_programs(trainer, report, compile_workers(), meanwhile)
    except Exception as e:  # noqa: BLE001 - the run compiles as it goes instead
        print(f"dreamerjax: warning: compiling the run's programs at once failed "
              f"({type(e).__name__}: {e}); compiling them as they are first called",
              file=sys.stderr)
        return None
    trainer.use_executables(executables)
    return {"seconds": secs, "wall_s": time.perf_counter() - t, "in_process": True,
            "executables": sorted(executables)}


def compile_workers() -> int:
    """Threads for compile_trainer: one per program (init, chunk, eval, report) where the
    host has the cores; one on a GPU, whose compiles autotune by running kernels on the
    device, beside the parent's share of its memory."""
    import jax
    if jax.default_backend() in GPU_BACKENDS:
        return 1
    return max(1, min(4, os.cpu_count() or 1))


def child(spec: dict) -> dict:
    """The child's work: the spec's Trainer compiled into the spec's cache directory."""
    import jax

    from dreamerjax.config.defaults import from_dict
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run import trainers

    jax.config.update("jax_compilation_cache_dir", spec["cache_dir"])
    # Store every program, small ones too: the parent reads whatever is there.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # The parent's plan, made once in this process from what child_spec sent.
    plan = plan_lib.make_plan(from_dict(spec["config"]), spec["seeds"], int(spec["devices"]))
    trainer = trainers.CompiledTrainer(plan)
    secs = compile_trainer(trainer, bool(spec.get("report", True)), compile_workers())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": secs, "peak_rss_mib": peak,
            "env": {name: os.environ.get(name) for name in CHILD_ENV}}


def child_spec(plan, report: bool, cache_dir: str) -> dict:
    """What the child needs to make the parent's plan once in its own process (child):
    the config, seeds and devices, without run.from_checkpoint (its source's agent is
    loaded by the parent after init and changes no program, so the child does not read
    the source again), whether to compile the report, and the cache to fill."""
    run = dataclasses.replace(plan.config.run, from_checkpoint="", from_checkpoint_regex="")
    config = dataclasses.replace(plan.config, run=run)
    return {"config": config.to_dict(), "seeds": list(plan.seeds), "devices": plan.devices,
            "report": bool(report), "cache_dir": str(cache_dir)}


def child_env(parent: dict[str, str]) -> dict[str, str]:
    """The child's environment: the parent's (XLA_FLAGS, the cache's location, ...) with
    CHILD_ENV over it, whatever the parent's own says (its backend is already up)."""
    return {**parent, **CHILD_ENV}


def in_process() -> bool:
    """Whether the backend's devices open in one process at a time (EXCLUSIVE_BACKENDS),
    so no child can compile beside the run: precompile then compiles in this process."""
    import jax
    return jax.default_backend() in EXCLUSIVE_BACKENDS


def compiles_here(choice: bool | None) -> bool:
    """Where a run's precompile compiles (Settings.precompile_here): None, the backend's
    choice (in this process where no child can open the devices, in_process; else in a
    child), or the caller's."""
    return in_process() if choice is None else bool(choice)


def precompile(plan, report: bool = True, timeout: float | None = None,
               here: bool | None = None, trainer=None,
               meanwhile: Callable[[], object] | None = None) -> dict | None:
    """Compile the programs of a run's plan (run/plan.Plan) before its first call: in a
    child process into the persistent cache, or (here; default in_process()) in this
    process, compile_workers() threads at once. Returns the figures (seconds per
    function; from a child also its peak RSS and the CHILD_ENV variables as it received
    them; wall seconds), or None when skipped (several processes, host envs, a child
    without a cache directory) or the compile failed (the run then compiles as it goes).

    trainer: the run's own trainers.CompiledTrainer of the plan. Here, its own programs
    are compiled and handed to it (compile_here; no cache needed), so its calls run those
    executables. With a child: while the child compiles, this process lowers the trainer's
    programs (lower_programs), and once the child has stored them it loads them from the
    cache, so the trainer's calls trace, lower and compile nothing (figures: `lower_s`,
    `load_s`); a lookup that misses compiles here, as the first call would have. Here
    without a trainer, a fresh trainer's programs fill the cache and are dropped (the
    trainer made later loads them from it, after tracing them again; cache_check.py).
    meanwhile: called once the programs are lowered, while they compile (the driver's
    imports of what the run needs later)."""
    import jax

    if plan.host or jax.process_count() > 1:
        return None
    here = compiles_here(here)
    if here and trainer is not None:
        return compile_here(trainer, report, meanwhile)
    cache_dir = _cache_dir()
    if not cache_dir:
        return None
    if here:
        from dreamerjax.run import trainers

        t = time.perf_counter()
        try:
            secs = compile_trainer(trainers.CompiledTrainer(plan), report, compile_workers())
        except Exception as e:  # noqa: BLE001 - the run compiles as it goes instead
            print(f"dreamerjax: warning: compiling the run's programs at once failed "
                  f"({type(e).__name__}: {e}); compiling them as they are first called",
                  file=sys.stderr)
            return None
        return {"seconds": secs, "wall_s": time.perf_counter() - t, "in_process": True}
    t = time.perf_counter()
    # Its output in files, read once it has exited: pipes left unread while this process
    # lowers could fill and stall it.
    with tempfile.TemporaryFile("w+") as output, tempfile.TemporaryFile("w+") as errors:
        try:
            proc = subprocess.Popen([sys.executable, "-m", "dreamerjax.run.precompile"],
                                    stdin=subprocess.PIPE, stdout=output, stderr=errors,
                                    text=True, env=child_env(dict(os.environ)))
        except OSError as e:
            print(f"dreamerjax: warning: precompile child failed ({e}); compiling here",
                  file=sys.stderr)
            return None
        try:
            proc.stdin.write(json.dumps(child_spec(plan, report, cache_dir)))
            proc.stdin.close()
            lowered, lower_s = None, 0.0
            if trainer is not None:  # this process's tracing while the child compiles
                lowered = lower_programs(trainer, report)
                lower_s = time.perf_counter() - t
            if meanwhile is not None:
                meanwhile()
            left = None if timeout is None else max(timeout - (time.perf_counter() - t), 1)
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired as e:
            proc.kill()
            proc.wait()
            print(f"dreamerjax: warning: precompile child failed ({e}); compiling here",
                  file=sys.stderr)
            return None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if proc.returncode:
            errors.seek(0)
            tail = " ".join(errors.read().strip().splitlines()[-3:])
            print(f"dreamerjax: warning: precompile child exited {proc.returncode} "
                  f"({tail}); compiling here", file=sys.stderr)
            return None
        output.seek(0)
        stdout = output.read()
    out = json.loads(stdout.strip().splitlines()[-1])
    if lowered is not None:  # the child's executables, loaded from the cache
        t_load = time.perf_counter()
        for program in lowered.values():
            program.compile()
        out.update(lower_s=lower_s, load_s=time.perf_counter() - t_load)
    out["wall_s"] = time.perf_counter() - t
    return out


def _cache_dir() -> str | None:
    import jax
    return jax.config.jax_compilation_cache_dir


def malloc_trim() -> bool:
    """Give glibc's freed heap pages back to the system (malloc_trim(0)); False where
    there is no glibc. Loading an executable from the cache allocates and frees about
    0.4 GiB (the 1m chunk), which glibc otherwise keeps as RSS under what comes next."""
    import ctypes
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def trimming(enabled: bool = True):
    """While inside: malloc_trim after every XLA compile or cache load that took at least
    TRIM_AFTER_S (jax.monitoring's backend-compile event), and once on entry. It changes
    where freed memory goes, not what is computed. The listener is removed on exit."""
    if not enabled:
        yield
        return
    import jax

    def listener(event: str, duration: float, **_) -> None:
        if event.endswith("backend_compile_duration") and duration >= TRIM_AFTER_S:
            malloc_trim()

    jax.monitoring.register_event_duration_secs_listener(listener)
    malloc_trim()
    try:
        yield
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def main() -> int:
    spec = json.loads(sys.stdin.read())
    print(json.dumps(child(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def default_compile_cache_dir() -> str:
    """The command line's persistent compilation cache: ~/.cache/dreamerjax/jax (under
    XDG_CACHE_HOME when set)."""
    return os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")),
                        "dreamerjax", "jax")


def enable_compile_cache(cache: bool | str | os.PathLike | None = True) -> None:
    """Point jax.config's persistent compilation cache at `cache` (a directory; True: the
    command line's, default_compile_cache_dir()); None or False leaves jax.config alone."""
    if cache is None or cache is False:
        return
    import jax

    path = default_compile_cache_dir() if cache is True else os.fspath(cache)
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
