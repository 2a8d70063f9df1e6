"""Bytes a run writes per log point: the replay's chunk files, its latent files and the
checkpoint (without the ring, run/replay_files.py), against the checkpoint that held the
whole state with the ring (prints JSON; asserts nothing).

    python benchmarks/replay_files_bytes.py [--env CartPole-v1] [--size 1m | --tiny]
        [--steps 20000] [--logs 2] [--out FILE]
    python benchmarks/replay_files_bytes.py --shapes --env atari_pong --configs atari
        --reference e3f0224 --size 200m

--shapes trains nothing: it computes one seed's bytes per log point from the run's state
shapes (the config as `dreamerjax info` resolves it; nothing allocated): before, the
checkpoint of the whole state with the ring; after, the log point's new rows as chunk
rows (data/chunks.chunk_rows: the observation, action, reward, flags, the latents as
'dyn/deter' and one-hot 'dyn/stoch', 'stepid'; uncompressed, an upper bound of
savez_compressed), the checkpoint without the ring, and at most the latents of every row
the interval's updates wrote back (updates x batch_size x batch_length rows, and no more
than the ring holds: a row drawn twice is written once), which the snapshot rule
(run/replay_files.py) at most doubles.

Trains the config (the CartPole protocol's by default: 16 envs, a log point every 2,000
rows, the ring sized by --steps: 1,250 rows per env) for --logs log points (stop_after_rows)
into a fresh directory, and after every log point's checkpoint reads the sizes on disk of
what that log point added: the chunk files of every seed (RUN/replay/seed_N/*.npz), the
latent file (RUN/replay/seed_N/latents/) and the checkpoint directory. The "before" size
is measured, not estimated: the whole state at that checkpoint (the checkpoint's state
and the ring rebuilt from the files, resume.load_state) saved with checkpoint.save into a
scratch directory, as a checkpoint was written when it held the ring.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def _size(paths) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--size", default="1m")
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--logs", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--tiny", action="store_true",
                        help="the tests' tiny network in place of --size (a quick run)")
    parser.add_argument("--shapes", action="store_true")
    parser.add_argument("--configs", nargs="*", default=())
    parser.add_argument("--reference", default=None)
    args = parser.parse_args(argv)
    if args.shapes:
        result = from_shapes(args)
        _write(result, args.out)
        return result

    import jax

    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import checkpoint as ckpt
    from dreamerjax.run import driver, replay_files, resume
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer

    model = {"tiny": True} if args.tiny else {"size": args.size}
    config = make_config(args.env, steps=args.steps, sets=["run.checkpoint_keep=all"],
                         **model)
    run = config.run
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        seen: set[Path] = set()
        t0 = time.time()
        driver.train(config, (0,), str(out), progress=False, report=False,
                     tensorboard=False, stop_after_rows=args.logs * run.eval_every)
        wall = time.time() - t0
        trainer = make_trainer(make_plan(config, (0,)))
        rows = []
        # every checkpoint is kept by index; the files of each log point are told apart by
        # the chunk names' and latent files' order of writing (mtime)
        files = sorted((p for p in (out / replay_files.RUN_REPLAY).rglob("*.npz")),
                       key=lambda p: p.stat().st_mtime)
        ckpts = {i: out / ckpt.CHECKPOINT_DIR / str(i) for i in ckpt.indices(out)}
        last_t = 0.0
        for i, directory in sorted(ckpts.items()):
            t = directory.stat().st_mtime
            mine = [p for p in files if last_t < p.stat().st_mtime <= t and p not in seen]
            seen.update(mine)
            last_t = t
            meta = ckpt.read_meta(out, i)
            whole = resume.load_state(trainer, str(out), i, meta)
            scratch = Path(tmp) / f"before_{i}"
            ckpt.save(scratch, i, whole, meta)
            ring = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(whole.replay.data))
            rows.append({
                "log_index": i, "rows": meta["rows"],
                "chunk_bytes": _size(p for p in mine if p.parent.name != "latents"),
                "latent_bytes": _size(p for p in mine if p.parent.name == "latents"),
                "checkpoint_bytes": _size(directory.rglob("*")),
                "before_checkpoint_bytes": _size(scratch.rglob("*")),
                "ring_bytes_in_memory": ring})
        for r in rows:
            r["after_bytes"] = r["chunk_bytes"] + r["latent_bytes"] + r["checkpoint_bytes"]
            r["before_bytes"] = r["before_checkpoint_bytes"]
        result = {
            "benchmark": "replay_files_bytes", "env": args.env,
            "size": "tiny" if args.tiny else args.size,
            "steps": args.steps, "num_envs": run.num_envs, "eval_every": run.eval_every,
            "replay_rows_per_env": trainer.setup.capacity, "log_points": rows,
            "train_wall_s": round(wall, 1), "jax": jax.__version__,
            "backend": jax.default_backend(), "date": time.strftime("%Y-%m-%d")}
    _write(result, args.out)
    return result


def _write(result: dict, out: str | None) -> None:
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        Path(out).write_text(text + "\n")


def from_shapes(args) -> dict:
    import jax
    import numpy as np

    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import loop
    from dreamerjax.run import setup as setup_lib
    from dreamerjax.run.trainers import without_rows

    config = make_config(args.env, configs=list(args.configs), reference=args.reference,
                         size=args.size)
    run, rssm = config.run, config.agent.rssm
    setup = setup_lib.make_setup(config)
    state = jax.eval_shape(lambda k: loop.init_seed(setup, k, loop.metric_names(setup)),
                           jax.random.PRNGKey(0))

    def nbytes(tree):
        return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize
                   for x in jax.tree.leaves(tree))

    data = state.replay.data
    per_row = {k: nbytes(v) // (run.num_envs * setup.capacity) for k, v in data.items()}
    ring = nbytes(data)
    index = nbytes(without_rows(state).replay)
    mask = run.num_envs * setup.capacity  # ReplayState.dirty, one byte per row: new
    checkpoint = nbytes(without_rows(state))
    chunk_row = (per_row["obs"] + per_row["action"] + per_row["reward"] + 3
                 + 4 * rssm.deter + 4 * rssm.stoch * rssm.classes + 20)
    updates = run.eval_every * run.train_ratio / (run.batch_size * run.batch_length)
    # rows written back: each update's batch, at most every row the ring holds
    written_back = min(int(updates * run.batch_size * run.batch_length),
                       run.num_envs * setup.capacity)
    latent_row = 4 + 8 + per_row["deter"] + per_row["stoch"]
    rows = run.eval_every
    after = rows * chunk_row + checkpoint + written_back * latent_row
    return {
        "benchmark": "replay_files_bytes", "mode": "shapes", "env": run.env,
        "configs": list(args.configs), "reference": config.agent.reference,
        "size": args.size, "num_envs": run.num_envs, "replay_rows_per_env": setup.capacity,
        "row_bytes": per_row, "ring_bytes": ring, "eval_every": rows,
        "updates_per_log_point": updates, "rows_written_back_at_most": written_back,
        "before": {"checkpoint_bytes": ring + checkpoint - mask},
        "after": {"chunk_bytes_uncompressed": rows * chunk_row, "chunk_row_bytes": chunk_row,
                  "checkpoint_bytes": checkpoint, "replay_index_bytes": index,
                  "latent_bytes_at_most": written_back * latent_row,
                  "latent_row_bytes": latent_row, "total_at_most": after,
                  "total_at_most_with_snapshots": after + written_back * latent_row}}


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
