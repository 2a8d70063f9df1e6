"""Bytes a run writes per log point: the replay's chunk files, its latent files and the
checkpoint (without the ring, run/replay_files.py), against the checkpoint that held the
whole state with the ring (prints JSON; asserts nothing).

    python benchmarks/replay_files_bytes.py [--env CartPole-v1] [--size 1m]
        [--steps 20000] [--logs 2] [--out FILE]

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
    args = parser.parse_args(argv)

    import jax

    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import checkpoint as ckpt
    from dreamerjax.run import driver, replay_files, resume
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer

    config = make_config(args.env, size=args.size, steps=args.steps,
                         sets=["run.checkpoint_keep=all"])
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
        files = sorted((p for p in (out / replay_files.REPLAY_DIR).rglob("*.npz")),
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
            "benchmark": "replay_files_bytes", "env": args.env, "size": args.size,
            "steps": args.steps, "num_envs": run.num_envs, "eval_every": run.eval_every,
            "replay_rows_per_env": trainer.setup.capacity, "log_points": rows,
            "train_wall_s": round(wall, 1), "jax": jax.__version__,
            "backend": jax.default_backend(), "date": time.strftime("%Y-%m-%d")}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
