"""`dreamerjax bench --env ID`: a whole run of an env through its own Trainer, chunk by
chunk, beside its compiled counterpart where there is one (run_env_bench)."""

from __future__ import annotations

import datetime
import os
import time

import numpy as np

from dreamerjax.tools.bench.options import Options, _env_argv
from dreamerjax.tools.bench.report import _print_result, _write_json, format_env_table, out_path
from dreamerjax.tools.bench.timing import machine


def compiled_counterpart(env_id: str) -> str | None:
    """The compiled env id of the same task (gym_CartPole-v1 -> gymnax CartPole-v1)."""
    from dreamerjax.envs.host import base as host_lib
    if not env_id.startswith("gym_"):
        return None
    from dreamerjax import envs as envs_lib
    task = host_lib.split_env_id(env_id)[1]
    try:
        if not envs_lib.parse_env_id(task)[0].compiled:
            return None
        envs_lib.make_env(task)
    except Exception:  # noqa: BLE001 - no compiled env of that name
        return None
    return task


def env_config(env_id: str, opts: Options, chunks: int):
    """The protocol's run (1m or tiny, 16 envs, train ratio 512, batch 16 x 64) over
    `chunks` log intervals of `opts.stretch` ticks, one evaluation episode (never run),
    with --set items applied (e.g. a CNN that fits MinAtar's 10 x 10 frames)."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.config.resolve import make_config
    n = opts.num_envs
    config = make_config(env_id, size=opts.size, tiny=opts.tiny, num_envs=n,
                         steps=chunks * opts.stretch * n, eval_every=opts.stretch * n,
                         eval_episodes=1)
    return config_resolve.with_sets(config, opts.set) if opts.set else config


def gate_chunks(opts: Options) -> int:
    """Chunks up to and including the one where the schedule's first update falls."""
    from dreamerjax.data import schedule as schedule_lib
    config = env_config("CartPole-v1", opts, 10**4)
    sched = schedule_lib.schedule_from_config(config.run, config.agent.reference)
    tick = 0
    while int(schedule_lib.updates_owed(sched, tick)) == 0:
        tick += 1
    return tick // opts.stretch + 1


class _Run:
    """One seed's run of an env, driven chunk by chunk by its own Trainer."""

    def __init__(self, env_id: str, opts: Options, chunks: int):
        import jax

        from dreamerjax.run import plan as plan_lib
        from dreamerjax.run import trainers
        self.env_id = env_id
        plan = plan_lib.make_plan(env_config(env_id, opts, chunks), (0,))
        self.setup, self.host = plan.setup, plan.host
        self.trainer = trainers.make_trainer(plan)
        if self.host:
            self.trainer.profile = {}
        t = time.perf_counter()
        self.states = jax.block_until_ready(self.trainer.init())
        self.init_seconds = time.perf_counter() - t
        self.index = 0
        self.chunks: list[dict] = []

    def chunk(self) -> dict:
        import jax
        t = self.setup.ticks_per_log
        due = int(np.sum(self.trainer.updates_due[self.index * t:(self.index + 1) * t]))
        prof = self.trainer.profile if self.host else None
        if prof is not None:
            prof.clear()
        t0 = time.perf_counter()
        states, ends = self.trainer.chunk(self.states, self.index)
        t1 = time.perf_counter()
        self.states = jax.block_until_ready(states)
        jax.block_until_ready(ends)
        secs = time.perf_counter() - t0
        out = {"index": self.index, "ticks": t, "rows": t * self.setup.run.num_envs,
               "updates": due, "seconds": secs}
        if prof is not None:  # where the host loop's time went
            out["host"] = {k: float(v) for k, v in prof.items() if k != "ticks"}
            out["host"]["final_wait"] = secs - (t1 - t0)
        if (np.asarray(self.states.bad_update) >= 0).any():
            raise FloatingPointError(f"non-finite loss in the {self.env_id} bench")
        self.index += 1
        self.chunks.append(out)
        return out

    def close(self) -> None:
        if self.host:
            self.trainer.close()


def _summary(run: _Run, first_timed: int) -> dict:
    acting = [c for c in run.chunks[1:] if c["updates"] == 0]  # chunk 0 compiles
    timed = [c for c in run.chunks[first_timed:] if c["updates"] > 0]
    out = {"env": run.env_id, "host": run.host, "init_seconds": run.init_seconds,
           "first_chunk_seconds": run.chunks[0]["seconds"], "chunks": run.chunks}
    if acting:
        out["acting_rows_per_s"] = (sum(c["rows"] for c in acting)
                                    / sum(c["seconds"] for c in acting))
        out["acting_rows"] = sum(c["rows"] for c in acting)
        # the median chunk: one chunk preempted by other work moves the sum's figure
        out["acting_rows_per_s_median_chunk"] = float(np.median(
            [c["rows"] / c["seconds"] for c in acting]))
    if timed:
        per = [c["updates"] / c["seconds"] for c in timed]
        out["updates_per_s"] = sum(c["updates"] for c in timed) / sum(c["seconds"]
                                                                       for c in timed)
        out["updates_per_s_per_chunk"] = per
        out["updates_timed"] = sum(c["updates"] for c in timed)
        if run.host:
            keys = timed[0]["host"]
            out["host_seconds_timed"] = {k: sum(c["host"][k] for c in timed) for k in keys}
    return out


def run_env_bench(opts: Options) -> dict:
    """Acting rows/s and whole-run updates/s of --env (and its compiled counterpart)."""
    other = opts.compiled if opts.compiled is not None else compiled_counterpart(opts.env)
    gate = gate_chunks(opts)
    first_timed = gate if opts.rounds else max(2, gate - 1)
    chunks = first_timed + opts.rounds
    length = gate + max(opts.rounds, 1)  # the run's steps: a replay that holds a sequence
    loads = [os.getloadavg()]
    runs = [_Run(opts.env, opts, length)]
    if other:
        runs.append(_Run(other, opts, length))
    info = machine()
    try:
        for i in range(chunks):  # alternated A B B A ..., so both runs see the same load
            for r in (runs if i % 2 == 0 else runs[::-1]):
                r.chunk()
            loads.append(os.getloadavg())
    finally:
        for r in runs:
            r.close()
    out = {"config": {"size": "tiny" if opts.tiny else opts.size, "num_envs": opts.num_envs,
                      "train_ratio": runs[0].setup.run.train_ratio,
                      "batch_size": runs[0].setup.run.batch_size,
                      "batch_length": runs[0].setup.run.batch_length,
                      "seeds": 1, "stretch_ticks": opts.stretch, "rounds": opts.rounds,
                      "set": list(opts.set)},
           "machine": info, "loadavg": [list(x) for x in loads],
           "runs": [_summary(r, first_timed) for r in runs],
           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command": "dreamerjax bench " + " ".join(_env_argv(opts))}
    a, b = out["runs"][0], out["runs"][-1]
    if len(runs) == 2 and "updates_per_s" in a and "updates_per_s" in b:
        out["host_over_compiled_updates_per_s"] = a["updates_per_s"] / b["updates_per_s"]
    return out


def env_main(opts: Options) -> int:
    result = run_env_bench(opts)
    written = []
    if opts.out:  # a .json file, or a folder for env_<id>_<date>.json
        day = result["date"][:10].replace("-", "")
        name = opts.env.replace(":", "_").replace("/", "_")
        written = [out_path(opts.out, f"env_{name}_{day}.json")]
        _write_json(result, written[0])
    return _print_result(result, opts.json, format_env_table, written)
