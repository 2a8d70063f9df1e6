"""Whether a run's programs, compiled ahead from the trainer's abstract state
(run/precompile.compile_trainer, as `precompile(here=True)` does), are the programs the
trainer then calls: one JSON object, nothing asserted.

    python benchmarks/cache_check.py [--env CartPole-v1] [--size 1m | --tiny]
        [--configs NAME ...] [--seeds 3] [--set KEY=VALUE ...] [--workers 4] [--out FILE]

In this process, into an empty persistent cache: the programs compiled ahead (init,
chunk, evaluation), then a second trainer of the same plan, as driver.train makes it,
runs init, one chunk and one evaluation. Reported: each compile after the ahead-of-time
ones (program, seconds, whether the persistent cache had it), JAX's own lines for the
persistent cache's misses (`jax_explain_cache_misses`), the cache's entries, and for the
chunk and the evaluation whether the program lowered from the abstract state is the text
lowered from the concrete state the trainer holds (else the first lines that differ). On
a CPU every program of the run loads from the cache; on one TPU v5e chip the trainer
compiled its chunk and evaluation again (docs/performance.md, "On a TPU"), which this
is made to explain there.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
import tempfile
import time


def text_diff(a: str, b: str, lines: int = 20) -> dict:
    """Whether two lowered programs' texts are equal; else the first differing lines."""
    if a == b:
        return {"equal": True}
    diff = [x for x in difflib.unified_diff(a.splitlines(), b.splitlines(), "abstract",
                                            "concrete", n=0, lineterm="")
            if x[:1] in "+-" and x[:3] not in ("+++", "---")]
    return {"equal": False, "lines_differing": len(diff),
            "first": [x[:300] for x in diff[:lines]]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--size", default="1m")
    p.add_argument("--tiny", action="store_true", help="the tiny network (a quick check)")
    p.add_argument("--configs", nargs="*", default=[])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    import jax

    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run import precompile, trainers

    cache = tempfile.mkdtemp(prefix="cache_check_")
    precompile.enable_compile_cache(cache)
    jax.config.update("jax_explain_cache_misses", True)
    misses: list[str] = []

    class Misses(logging.Handler):
        def emit(self, record):
            text = record.getMessage()  # the tracing cache's misses are JAX's too
            if "PERSISTENT COMPILATION CACHE MISS" in text:
                misses.append(text[:300])

    logging.getLogger("jax").addHandler(Misses(logging.WARNING))
    hits: list[int] = []
    compiles: list[dict] = []
    jax.monitoring.register_event_listener(
        lambda e, **_: hits.append(1) if e.endswith("/cache_hits") else None)

    def on_duration(event, seconds, **kw):
        if event.endswith("backend_compile_duration"):
            compiles.append({"fun": kw.get("fun_name"), "s": round(seconds, 2),
                             "cache_hit": bool(hits)})
            hits.clear()

    jax.monitoring.register_event_duration_secs_listener(on_duration)

    config = make_config(args.env, size=None if args.tiny else args.size, tiny=args.tiny,
                         configs=args.configs, sets=args.set)
    plan = plan_lib.make_plan(config, tuple(range(args.seeds)), 1)
    t = time.perf_counter()
    ahead = precompile.compile_trainer(trainers.CompiledTrainer(plan), False, args.workers)
    ahead_wall = time.perf_counter() - t
    entries = sorted(os.listdir(cache))
    compiles.clear()
    misses.clear()

    trainer = trainers.make_trainer(plan)
    t = time.perf_counter()
    states = trainer.init()
    out = trainer.chunk(states, 0)
    jax.block_until_ready(out)
    states = out[0]
    jax.block_until_ready(trainer.evaluate(states.agent.params, 0))
    calls_wall = time.perf_counter() - t

    abstract = trainer.abstract_state()
    lowered = {
        "chunk": text_diff(
            trainer._chunk.lower(trainer.chunk_input(abstract), trainer.owed(0)).as_text(),
            trainer._chunk.lower(trainer.chunk_input(states), trainer.owed(0)).as_text()),
        "eval": text_diff(
            trainer._eval.lower(abstract.agent.params, trainer._keys(), False).as_text(),
            trainer._eval.lower(states.agent.params, trainer._keys(), False).as_text()),
    }
    device = jax.devices()[0]
    result = {"command": ["python", "benchmarks/cache_check.py", *(argv or sys.argv[1:])],
              "backend": jax.default_backend(), "device_kind": device.device_kind,
              "jax": jax.__version__, "env": args.env, "size": "tiny" if args.tiny else args.size,
              "configs": args.configs,
              "seeds": args.seeds, "sets": args.set,
              "ahead_seconds": ahead, "ahead_wall_s": ahead_wall,
              # compiles shorter than this are not stored, so not loaded either
              "min_compile_time_s": jax.config.jax_persistent_cache_min_compile_time_secs,
              "cache_entries_after_ahead": entries,
              "trainer_calls_wall_s": calls_wall, "trainer_compiles": compiles,
              "persistent_cache_misses": misses,
              "cache_entries_after_calls": sorted(os.listdir(cache)),
              "lowered_abstract_vs_concrete": lowered}
    from experiments._emit import emit  # benchmarks/ is first on sys.path as a script

    return emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
