"""Whether two seeds of the protocol's 1m CartPole update can share a 2-core CPU better than
one after another: four ways of running 2 seeds' updates, alternated round after round in
one process, per-seed seconds per update.

    python benchmarks/experiments/seed_concurrency.py [--rounds 3] [--updates 6] [--out FILE.json]

- map: dreamerjax's default on a CPU (run.seed_loop auto): one program, the seeds one after
  the other inside it (`lax.map`);
- unroll: one program holding each seed's update as its own independent subgraph (the seeds'
  results stacked), so XLA:CPU's executor is free to run them side by side;
- sequential: the compiled 1-seed program called for seed 0, then seed 1;
- threads: the same 1-seed program called for both seeds from two Python threads at once
  (JAX releases the GIL while XLA runs; both executions share XLA:CPU's thread pool).

Each arm starts from the same initial states and does the same number of updates per round,
so after the rounds the parameters of map, unroll and sequential/threads are compared too
(`equal_params`). Prints one JSON object; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time

import numpy as np
from _emit import emit

from dreamerjax.run import xla_tuning

xla_tuning.apply()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from dreamerjax.run import loop  # noqa: E402
from dreamerjax.tools import bench  # noqa: E402

SEEDS = 2


def programs(setup):
    """name -> compiled program over a [SEEDS, ...] state (map, unroll) or a [1, ...] one."""
    def unrolled(states):
        outs = [loop.train_once(setup, jax.tree.map(lambda a, i=i: a[i], states))
                for i in range(SEEDS)]
        return jax.tree.map(lambda *a: jnp.stack(a), *outs)

    mapped = bench.update_program(loop.with_run(setup, seed_loop="map"))
    out, compile_s = {}, {}
    for name, fn, n in (("map", mapped, SEEDS),
                        ("unroll", jax.jit(unrolled, donate_argnums=0), SEEDS),
                        ("single", mapped, 1)):
        t = time.perf_counter()
        out[name] = fn.lower(bench.abstract_states(setup, n)).compile()
        compile_s[name] = time.perf_counter() - t
    return out, compile_s


def split(states):
    """[SEEDS, ...] -> SEEDS states of [1, ...]."""
    return [jax.tree.map(lambda a, i=i: a[i:i + 1], states) for i in range(SEEDS)]


def run_arm(name, progs, state, updates: int):
    """Runs `updates` updates of every seed; returns (state, seconds per seed-update)."""
    t = time.perf_counter()
    if name in ("map", "unroll"):
        for _ in range(updates):
            state = jax.block_until_ready(progs[name](state))
    elif name == "sequential":
        for _ in range(updates):
            for i in range(SEEDS):
                state[i] = jax.block_until_ready(progs["single"](state[i]))
    else:  # threads
        def work(i):
            for _ in range(updates):
                state[i] = jax.block_until_ready(progs["single"](state[i]))
        pool = [threading.Thread(target=work, args=(i,)) for i in range(SEEDS)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
    return state, (time.perf_counter() - t) / (updates * SEEDS)


def params_of(state):
    """The seeds' parameters, [SEEDS, ...] leaves, whichever arm held them."""
    if isinstance(state, list):
        return jax.tree.map(lambda *a: np.concatenate(a), *[s.agent.params for s in state])
    return jax.tree.map(np.asarray, state.agent.params)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--updates", type=int, default=6, help="updates per seed, arm and round")
    p.add_argument("--out", help="also write the JSON to this file")
    args = p.parse_args(argv)
    setup = bench.make_setup(False)
    progs, compile_s = programs(setup)
    arms = ("map", "unroll", "sequential", "threads")
    states = {a: bench.init_states(setup, SEEDS) for a in arms}
    states["sequential"] = split(states["sequential"])
    states["threads"] = split(states["threads"])
    secs = {a: [] for a in arms}
    for a in arms:  # one untimed update each: first-call costs out of the rounds
        states[a], _ = run_arm(a, progs, states[a], 1)
    load = [os.getloadavg()]
    for _ in range(args.rounds):
        for a in arms:
            states[a], s = run_arm(a, progs, states[a], args.updates)
            secs[a].append(s)
    load.append(os.getloadavg())
    ref = params_of(states["map"])
    equal = {a: all(bool(np.array_equal(x, y)) for x, y in zip(
        jax.tree.leaves(ref), jax.tree.leaves(params_of(states[a])), strict=True))
        for a in arms[1:]}
    result = {
        "command": "python benchmarks/experiments/seed_concurrency.py "
                   + " ".join(argv or sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpu": bench.machine().get("cpu"), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "jax": jax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "seeds": SEEDS, "rounds": args.rounds, "updates_per_round": args.updates,
        "compile_s": compile_s,
        "seconds_per_seed_update_by_round": secs,
        "median": {a: float(np.median(v)) for a, v in secs.items()},
        "threads_over_sequential": float(np.median(secs["sequential"])
                                         / np.median(secs["threads"])),
        "unroll_over_map": float(np.median(secs["map"]) / np.median(secs["unroll"])),
        "equal_params_to_map": equal,
        "loadavg_before_after": load,
    }
    return emit(result, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
