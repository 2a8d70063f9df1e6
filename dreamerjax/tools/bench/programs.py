"""The programs the bench times: the bare update (update_program, ticks_program,
compile_update; benchmarks/side_by_side times it beside the reference's), the run's
plan and trainer for a benched point (point_config, make_trainer), their compile (in
this process or a compile worker's) and measure_point, which times one point through
the run's own chunks."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import resource
import subprocess
import sys
import time

import numpy as np

from dreamerjax.tools.bench.options import ENV, SIZE, Options
from dreamerjax.tools.bench.timing import _stats


def make_setup(tiny: bool, sets: tuple[str, ...] = (), size: str = SIZE):
    """The benched configuration: CartPole at `size` (or tiny), `--set` items applied."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import loop as loop
    from dreamerjax.run import setup as setup_lib
    config = make_config(ENV, size=size, tiny=tiny, sets=sets, check=False)
    if sets:  # over the bench's own values, as point_config applies them
        config = config_resolve.with_sets(config, sets)
    if config.run.replay_memory != "device":  # its states are made on the device
        raise ValueError("run.replay_memory: `dreamerjax bench` times the update on a device "
                         "replay; benchmarks/replay_memory.py times a host replay against it")
    return setup_lib.make_setup(config)


def abstract_states(setup, num_seeds: int):
    """Shapes of a batch of SeedStates [num_seeds, ...] (nothing is computed)."""
    import jax
    import jax.numpy as jnp

    from dreamerjax.run import loop as loop
    names = tuple(loop.metric_names(setup))
    keys = jax.ShapeDtypeStruct((num_seeds, 2), jnp.uint32)
    return jax.eval_shape(jax.vmap(lambda k: loop.init_seed(setup, k, names)), keys)


def init_states(setup, num_seeds: int):
    """Fresh states of seeds 0 ... num_seeds - 1 from their train keys (run/streams.py)."""
    import jax

    from dreamerjax.run import loop as loop
    from dreamerjax.run import streams
    names = tuple(loop.metric_names(setup))
    keys = streams.keys(range(num_seeds), "train")  # a run's seeds 0 ... n - 1
    return jax.jit(jax.vmap(lambda k: loop.init_seed(setup, k, names)))(keys)


def update_program(setup):
    """The timed update: every seed samples, updates and writes back once. states -> states."""
    import jax

    from dreamerjax.run import loop as loop
    return jax.jit(lambda st: loop.over_seeds(setup, lambda s: loop.train_once(setup, s), st),
                   donate_argnums=0)


def ticks_program(setup, ticks: int):
    """`ticks` ticks of acting and storing (no updates) for every env of every seed."""
    import jax

    from dreamerjax.run import loop as loop

    def run(states):
        def tick(st, _):
            st, _ = loop.over_seeds(setup, lambda s: loop.act_and_store(setup, s), st)
            return st, None
        return jax.lax.scan(tick, states, None, length=ticks)[0]

    return jax.jit(run, donate_argnums=0)


def compile_update(setup, num_seeds: int):
    """Trace, lower and compile the update for num_seeds. Returns (compiled, seconds)."""
    t0 = time.perf_counter()
    traced = update_program(setup).trace(abstract_states(setup, num_seeds))
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    return compiled, {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2,
                      "total": t3 - t0}


def use_cache(path: str) -> None:
    """Point the persistent compilation cache at path, storing every program. Takes effect
    only before this process's first compile (JAX initialises the cache once)."""
    import jax
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def compile_worker(cache: str, config: dict, seed_counts: list[int]) -> dict:
    """Run in a fresh process: the run's chunk and init (compile_trainer_chunk) compiled for
    each seed count against `cache`."""
    import jax

    from dreamerjax.config.defaults import from_dict
    use_cache(cache)
    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **_: hits.append(1) if event.endswith("/cache_hits") else None)
    out, plan = {}, None
    for n in seed_counts:  # the config checked once, by the first count's plan
        before = len(hits)
        plan, trainer = make_trainer(from_dict(config), n, like=plan)
        _, secs = compile_trainer_chunk(trainer)
        out[str(n)] = dict(secs, cache_hits=len(hits) - before)
    return out


def _run_worker(cache: str, opts: Options, seed_counts) -> dict:
    config, _ = point_config(opts, opts.size)
    spec = json.dumps({"cache": cache, "config": config.to_dict(),
                       "seed_counts": list(seed_counts)})
    worker = [sys.executable, "-m", "dreamerjax.tools.bench", "--compile-worker", spec]
    proc = subprocess.run(worker, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"compile worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    worker = json.loads(proc.stdout.strip().splitlines()[-1])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker["children_peak_rss_mib"] = usage.ru_maxrss / 1024
    return worker


class DoesNotFit(MemoryError):
    """A point whose state or program does not fit the device's memory (found before
    anything is allocated for it)."""


def first_update_tick(config) -> int:
    """The first tick after which the run's schedule owes an update (the replay's gate)."""
    from dreamerjax.data import schedule as schedule_lib
    sched = schedule_lib.schedule_from_config(config.run, config.agent.reference)
    tick = 0
    while int(schedule_lib.updates_owed(sched, tick)) == 0:
        tick += 1
    return tick


@dataclasses.dataclass(frozen=True)
class Layout:
    """A benched run cut into chunks of `ticks` ticks (its log interval, the chunk the
    trainer compiles): `fill` chunks of acting alone before the replay's gate, `warm`
    chunks with updates untimed (the gate's own, then --warmup), `timed` chunks timed."""

    ticks: int
    fill: int
    warm: int
    timed: int

    @property
    def chunks(self) -> int:
        return self.fill + self.warm + self.timed


def point_config(opts: Options, size: str, dtype: str | None = None):
    """(config, Layout) of a benched run: CartPole at `size` (or tiny) with the protocol's
    schedule (16 envs, train ratio 512, batch 16 x 64), `--set` items and the compute
    dtype applied, as many rows as the layout's chunks of --stretch ticks: the chunks
    before the gate fill the replay, then --warmup and --updates updates at least (3 timed
    chunks at least, for a median)."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.resolve import make_config
    sets = (*opts.set, *((f"jax.compute_dtype={dtype}",) if dtype else ()))

    def config_of(**fields):  # checked once, by the point's plan (make_trainer)
        # the sets resolved with the preset, as `train` resolves them (so a
        # `--set reference=e3f0224` chooses the version), then once more over the bench's
        # own fields, which they override as before
        config = make_config(ENV, size=size, tiny=opts.tiny, sets=sets, check=False,
                             **fields)
        return config_resolve.with_sets(config, sets, check=False) if sets else config

    base = config_of()
    if base.run.replay_memory != "device":  # its states are made on the device
        raise ValueError("run.replay_memory: `dreamerjax bench` times the run on a device "
                         "replay; benchmarks/replay_memory.py times a host replay against it")
    run, ticks = base.run, opts.stretch
    per_chunk = max(1, round(ticks * run.num_envs * run.train_ratio
                             / (run.batch_size * run.batch_length)))
    gate = first_update_tick(base)
    layout = Layout(ticks, gate // ticks, 1 + math.ceil(opts.warmup / per_chunk),
                    max(3, math.ceil(opts.updates / per_chunk)))
    rows = ticks * run.num_envs
    return config_of(steps=layout.chunks * rows, eval_every=rows, eval_episodes=1), layout


@contextlib.contextmanager
def counting_compiles():
    """While inside: a list that gets one entry per XLA compile (backend_compile event)."""
    import jax
    seen: list[float] = []

    def listener(event: str, duration: float, **_) -> None:
        if event.endswith("backend_compile_duration"):
            seen.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def compile_trainer_chunk(trainer) -> tuple:
    """The trainer's chunk (and init) lowered and compiled for the run's abstract state,
    as the run's first call compiles them; JAX keeps the executables, so the run's calls
    find them. Returns (compiled chunk, seconds: trace, lower, compile, total, init)."""
    states = trainer.abstract_state()
    t0 = time.perf_counter()
    traced = trainer._chunk.trace(trainer.chunk_input(states), trainer.owed(0))
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    trainer._init.lower(trainer._keys()).compile()
    t4 = time.perf_counter()
    return compiled, {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2,
                      "total": t3 - t0, "init": t4 - t3}


def program_bytes(compiled) -> int | None:
    """Device bytes a compiled program needs while it runs (arguments, outputs not aliased
    to them, temporaries), from XLA's memory analysis; None where it gives none."""
    try:
        m = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend analyses memory
        return None
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
               + m.temp_size_in_bytes)


def make_trainer(config, num_seeds: int, like=None):
    """The run's plan (seeds 0 ... n - 1, one device) and trainer, as `train` makes them.
    like: the plan of the same config for another number of seeds (None: the config's
    plan made here); its checked config and built setup are taken (plan.for_seeds)."""
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run import trainers
    seeds = tuple(range(num_seeds))
    plan = plan_lib.make_plan(config, seeds) if like is None else \
        plan_lib.for_seeds(like, seeds)
    return plan, trainers.make_trainer(plan)


def measure_point(opts: Options, size: str, dtype: str | None, num_seeds: int,
                  like=None) -> dict:
    """One configuration timed through the run's own trainer: its chunk and init compiled
    in this process (timed), the run's state initialised from the seeds' train keys, the
    chunks before the gate (acting alone) and after it (acting and the updates the
    schedule owes) called as `train` calls them, each timed to block_until_ready.
    Raises DoesNotFit before allocating when the state or the compiled chunk exceeds the
    memory free on the device. like: the plan of this size and dtype for another number
    of seeds (the result's `_plan`), so that a bench checks its config once."""
    import jax

    from dreamerjax.run import memory
    config, layout = point_config(opts, size, dtype)
    plan, trainer = make_trainer(config, num_seeds, like)
    have, where = memory.available()
    mem = {"state_bytes": memory.tree_bytes(trainer.abstract_state()), "available_bytes": have,
           "available_where": where}
    if mem["state_bytes"] > have:
        raise DoesNotFit(f"does not fit: the run's state, {memory.fmt(mem['state_bytes'])}, "
                         f"exceeds {memory.fmt(have)} {where}")
    with counting_compiles() as compiles:
        compiled, secs = compile_trainer_chunk(trainer)
        mem["chunk_program_bytes"] = need = program_bytes(compiled)
        if need is not None and need > have:
            raise DoesNotFit(f"does not fit: the compiled chunk needs {memory.fmt(need)} "
                             f"(XLA's memory analysis), more than {memory.fmt(have)} {where}")
        before = len(compiles)
        states = jax.block_until_ready(trainer.init())
        chunks = []
        for i in range(layout.chunks):
            t = time.perf_counter()
            states, ends = trainer.chunk(states, i)
            states, _ = jax.block_until_ready((states, ends))
            chunks.append({"seconds": time.perf_counter() - t,
                           "updates": int(trainer.owed(i).sum())})
            if i == layout.fill + layout.warm - 1:
                before = len(compiles)  # compiles while the timed chunks ran: none expected
        compiled_while_timed = len(compiles) - before
    if (np.asarray(states.bad_update) >= 0).any():
        raise FloatingPointError(f"non-finite loss in the {num_seeds}-seed bench")
    acting = [c for c in chunks[1:layout.fill] if c["updates"] == 0]
    timed = chunks[layout.fill + layout.warm:]
    per_update = [c["seconds"] / c["updates"] for c in timed]
    rows = layout.ticks * plan.setup.run.num_envs * num_seeds
    return {
        "size": "tiny" if opts.tiny else size,
        "dtype": plan.setup.config.agent.compute_dtype, "seeds": num_seeds,
        "seed_loop": plan.seed_loop, "ticks_per_chunk": layout.ticks,
        "seconds_per_update": _stats(per_update),
        "seconds_per_update_per_seed": _stats(np.asarray(per_update) / num_seeds),
        "updates_timed": sum(c["updates"] for c in timed), "chunks_timed": len(timed),
        "acting_rows_per_s": (float(np.median([rows / c["seconds"] for c in acting]))
                              if acting else None),
        "compile_seconds": secs, "compiled_while_timed": compiled_while_timed,
        "memory": mem, "_setup": plan.setup, "_plan": plan,
    }
