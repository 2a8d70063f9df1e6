"""Compile a run's programs in a short-lived child process, so the training process
loads them from the persistent compilation cache instead of compiling them.

XLA's compile of the chunk (the update inside it) is the peak of a training process:
for the protocol's 1m CartPole run about 1.7 GiB, where the program itself needs about
350 MiB (results/bench/LOG.md, "Peak RSS of a training process"). A process never gives
that peak back, so driver.train (Settings(precompile=True)) first runs
`python -m dreamerjax.run.precompile` in a child: the child builds the same trainer,
lowers and compiles every jitted function of the run (init, chunk, evaluation, report)
with the run's shapes and shardings into the persistent cache, and exits; the training
process then finds each executable in the cache.

Nothing it does can change a result: the parent runs the executables XLA compiled for
the very same programs, and where anything differs (another flag, another jax config) the
parent's lookup misses and it compiles as before. Skipped when the cache is off
(--no-compile-cache), for host envs (host_loop.py), for multi-process runs, and unless the
caller asks for it (Settings(precompile=True); the command line does, --no-precompile
turns it off). A child that fails is reported on stderr and the run goes on.

The parent's backend is up before the child starts (the plan checks the run's devices),
and on a GPU JAX's client takes XLA_PYTHON_CLIENT_MEM_FRACTION (75 %) of every device as
it starts. The child runs on the same devices, so it is started with preallocation off
(CHILD_ENV, in its environment only): it takes what its compiles need (autotuning's
buffers) from the rest and gives it back as it exits. A TPU opens in one process at a
time, so no child can compile there; the same programs compiled at once in the training
process (precompile(here=True)) did not spare the trainer's own compiles on one TPU v5e
chip (the first log point came 131 s after 150 s of compiling at once, against 172 s
without it; the resume's compile at once took about 100 s with the cache filled), so a
run there does not precompile (driver.train; docs/performance.md, "On a TPU").
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
import time

TRIM_AFTER_S = 0.5  # compiles (or cache loads) at least this long are followed by a trim

# The child's environment over the parent's: JAX's GPU client (CUDA and ROCm) takes memory
# as the child's compiles need it instead of a fraction of each device at its start, which
# the parent's backend already holds.
CHILD_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
# Backends whose devices one process opens at a time: a child could not start beside the
# parent's backend (libtpu refuses a TPU another process holds).
EXCLUSIVE_BACKENDS = ("tpu",)
GPU_BACKENDS = ("gpu", "cuda", "rocm")


def compile_trainer(trainer, report: bool = True, workers: int = 1) -> dict:
    """Lower and compile every jitted function of a trainers.CompiledTrainer with the arguments
    driver.train passes them (abstract: nothing is computed). The programs are lowered one
    after another (tracing holds Python's lock) and compiled by `workers` threads at once:
    XLA compiles outside that lock, so with cores to spare the run waits for its longest
    compile (the chunk's) rather than for their sum. Returns seconds per name (each
    compile's own)."""
    import jax
    import numpy as np

    keys = trainer._keys()
    states = trainer.abstract_state()
    programs = {"init": (trainer._init, keys),
                "chunk": (trainer._chunk, trainer.chunk_input(states), trainer.owed(0)),
                "eval": (trainer._eval, states.agent.params, keys, False)}
    if report:
        programs["report"] = (trainer._report, states, np.asarray(jax.random.PRNGKey(0)))
    lowered = {name: fn.lower(*args) for name, (fn, *args) in programs.items()}
    secs = {}

    def compile_one(name):
        t = time.perf_counter()
        lowered[name].compile()
        secs[name] = time.perf_counter() - t

    if workers > 1:
        # The chunk first: the longest, so the others overlap it.
        order = sorted(lowered, key=lambda name: name != "chunk")
        with concurrent.futures.ThreadPoolExecutor(min(workers, len(order))) as pool:
            list(pool.map(compile_one, order))
    else:
        for name in lowered:
            compile_one(name)
    return {name: secs[name] for name in lowered}


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
    so no child can compile beside the run: precompile then compiles in this process, and
    driver.train does not precompile at all."""
    import jax
    return jax.default_backend() in EXCLUSIVE_BACKENDS


def precompile(plan, report: bool = True, timeout: float | None = None,
               here: bool | None = None) -> dict | None:
    """Fill the persistent cache with the programs of a run's plan (run/plan.Plan): from
    a child process, or (here; default in_process()) in this process, the programs
    compiled by compile_workers() threads at once and the executables dropped (the
    trainer's own calls then load them from the cache, after tracing them again). Returns
    the figures (seconds per function; from a child also its peak RSS and the CHILD_ENV
    variables as it received them; wall seconds), or None when skipped (no cache
    directory, several processes, host envs) or the compile failed (the run then compiles
    as it goes)."""
    import jax

    cache_dir = _cache_dir()
    if not cache_dir or plan.host or jax.process_count() > 1:
        return None
    if in_process() if here is None else here:
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
    spec = child_spec(plan, report, cache_dir)
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "dreamerjax.run.precompile"],
                              input=json.dumps(spec), capture_output=True, text=True,
                              env=child_env(dict(os.environ)), timeout=timeout,
                              check=False)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"dreamerjax: warning: precompile child failed ({e}); compiling here",
              file=sys.stderr)
        return None
    if proc.returncode:
        tail = " ".join(proc.stderr.strip().splitlines()[-3:])
        print(f"dreamerjax: warning: precompile child exited {proc.returncode} ({tail}); "
              "compiling here", file=sys.stderr)
        return None
    out = json.loads(proc.stdout.strip().splitlines()[-1])
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
