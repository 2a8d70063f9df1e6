"""What keeping the replay in host memory costs per update: the same compiled CartPole run
with run.replay_memory device and host, chunk for chunk side by side in one process
(prints JSON; asserts nothing).

    python benchmarks/replay_memory.py [--size tiny | --size 1m] [--seeds 1] [--repeats 5]
        [--ticks 10] [--set KEY=VALUE ...] [--out FILE]

Each arm is the run's own CompiledTrainer (make_config("CartPole-v1", size=...): 16 envs,
batch 16 x 64, train ratio 512; --set items applied to both) with its chunk of `--ticks`
ticks (every env steps once per tick, the updates the schedule owes after each). The chunks
up to the replay's gate are run untimed (compile and the act-only start); then `--repeats`
rounds each run the next chunk of both arms, alternating which goes first, and time it to
its last array (block_until_ready). Per arm: the first chunk's seconds (compile included),
each timed chunk's seconds, and seconds per update (a chunk's seconds over the updates it
ran; the seeds' updates run together) with their median; then the host arm's median over
the device arm's. Both arms compute the same numbers (tests/test_replay_host.py), so they
do the same work; the difference is the rows' moves to and from host memory (on a CPU the
two memories are the same RAM, so what is left is the moves' copying and the loops that
do them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("device", "host")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def command(argv: list[str]) -> str:
    """This benchmark's command line without --out and its file (a path of the machine)."""
    kept, skip = ["python", "benchmarks/replay_memory.py"], False
    for a in argv:
        if skip or a == "--out" or a.startswith("--out="):
            skip = a == "--out"
            continue
        kept.append(a)
    return " ".join(kept)


def make_trainer(arm: str, args, chunks: int):
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run import trainers

    tiny = args.size == "tiny"
    config = make_config("CartPole-v1", tiny=tiny, **({} if tiny else {"size": args.size}))
    every = args.ticks * config.run.num_envs
    sets = (*args.set, f"run.replay_memory={arm}", f"run.eval_every_rows={every}",
            f"run.steps={every * chunks}")
    config = config_resolve.with_sets(config, sets)
    return trainers.make_trainer(plan_lib.make_plan(config, tuple(range(args.seeds))))


def run(args) -> dict:
    import jax
    import numpy as np

    probe = make_trainer("device", args, 400)  # for its schedule: nothing is compiled
    t = probe.setup.ticks_per_log
    owed = probe.updates_due
    first = int(np.flatnonzero(owed)[0]) // t  # the chunk where the first update falls
    untimed = first + 1
    chunks = untimed + args.repeats
    arms = {arm: {"trainer": make_trainer(arm, args, chunks)} for arm in ARMS}
    for a in arms.values():
        a["states"] = jax.block_until_ready(a["trainer"].init())
        a["untimed_s"], a["chunk_s"], a["updates"] = [], [], []
        for i in range(untimed):
            t0 = time.perf_counter()
            a["states"], _ = a["trainer"].chunk(a["states"], i)
            jax.block_until_ready(a["states"])
            a["untimed_s"].append(time.perf_counter() - t0)
    for r in range(args.repeats):
        i = untimed + r
        for arm in (ARMS if r % 2 == 0 else ARMS[::-1]):
            a = arms[arm]
            t0 = time.perf_counter()
            a["states"], _ = a["trainer"].chunk(a["states"], i)
            jax.block_until_ready(a["states"])
            a["chunk_s"].append(time.perf_counter() - t0)
            a["updates"].append(int(np.sum(owed[i * t:(i + 1) * t])))
    out = {}
    for arm, a in arms.items():
        per = [s / n for s, n in zip(a["chunk_s"], a["updates"], strict=True) if n]
        kinds = sorted({x.sharding.memory_kind for x in jax.tree.leaves(a["states"].replay.data)})
        out[arm] = {"memory_kinds_of_rows": kinds, "first_chunk_s": a["untimed_s"][0],
                    "untimed_chunks_s": a["untimed_s"], "chunk_s": a["chunk_s"],
                    "updates_per_chunk": a["updates"], "s_per_update": per,
                    "median_s_per_update": statistics.median(per)}
    setup = probe.setup
    from dreamerjax.run import memory
    return {
        "what": "run.replay_memory host vs device: seconds per update of the same chunks",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command(sys.argv[1:]),
        "commit": _commit(), "cpu": cpu_model(), "cores": os.cpu_count(),
        "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
        "jax": jax.__version__, "size": args.size, "seeds": args.seeds,
        "seed_loop": probe.plan.seed_loop, "ticks_per_chunk": t,
        "batch": [setup.run.batch_size, setup.window_length],
        "row_bytes": memory.row_bytes(setup), "batch_bytes": memory.batch_bytes(setup),
        "replay_bytes": memory.replay_bytes(setup, args.seeds),
        "arms": out,
        "host_over_device": out["host"]["median_s_per_update"]
        / out["device"]["median_s_per_update"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="tiny", help="tiny, or a size preset (1m, 12m, ...)")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ticks", type=int, default=10, help="ticks per chunk")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    result = run(args)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
