"""Resuming a run: the checkpoint to continue from (damaged ones set aside), the refusal of
another config or other seeds, the state restored in this run's shapes, and the
TensorBoard scalars rebuilt from the records."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections.abc import Mapping, Sequence

import jax

from dreamerjax.config.defaults import Config, from_dict, replay_rows_per_env
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import records, replay_files
from dreamerjax.run.setup import SeedState
from dreamerjax.run.trainers import Trainer, without_rows


def resume_point(out: str, primary: bool) -> tuple[int, dict] | None:
    """The checkpoint a resume continues from: the newest that verifies (checkpoint.py);
    newer damaged ones are moved to run_dir/damaged/ (a warning each), so the files are
    cut back to the good one's offsets and its log points run again."""
    found, damaged = ckpt.latest_good(out)
    if damaged and primary:
        for path in ckpt.set_aside(out, damaged):
            print(f"dreamerjax: warning: moved the damaged checkpoint to {path}",
                  file=sys.stderr)
    ckpt.sync("dreamerjax_resume_point")
    return found


def check_replay_files(out: str) -> tuple[int, dict] | None:
    """Before anything compiles: the replay files of the checkpoint a resume will continue
    from (the newest that verifies, as resume_point chooses it, nothing moved) are there
    and whole (replay_files.check: every file read once); ReplayFilesError, one line,
    naming the first seed folder, chunk or latent file that is not, and what can be done.
    Returns that checkpoint's (index, meta), None where the run has none. Every process of
    a run calls it: orbax's reader of a checkpoint's meta joins all the processes."""
    found, _ = ckpt.latest_good(out, warn=lambda _: None)
    if found is None or replay_files.META_KEY not in found[1]:
        return found  # a fresh start, or load_state's refusal of an older version's checkpoint
    index, meta = found
    capacity = replay_rows_per_env(from_dict(meta["config"]).run)  # the ring it restores
    try:
        replay_files.check(out, meta["seeds"], meta[replay_files.META_KEY], capacity)
    except replay_files.ReplayFilesError as e:
        raise replay_files.ReplayFilesError(
            f"{e}; checkpoint {index} needs it to resume: restore it from a copy of the run, "
            f"or start a new run from this run's agent (its replay empty): dreamerjax train "
            f"--config {os.path.join(out, 'config.json')} --set run.from_checkpoint={out} "
            "--out NEW_DIR") from None
    return found


def start_updates(found) -> int:
    """Updates of the last seed at the checkpoint resumed from (0 for a fresh run)."""
    if not found:
        return 0
    updates = found[1].get("updates", 0)
    return int(updates[-1] if isinstance(updates, list) else updates)


def check_resumable(meta: Mapping, config: Config, seeds: tuple[int, ...]) -> None:
    """Refuse to resume a checkpoint with another config or other seeds. The checkpoint's
    config is read as a Config first, so one written before a field was renamed or added
    (loss_scales.dec -> dec_cnn / dec_mlp) compares in today's fields."""
    ckpt.check_compatible(from_dict(meta["config"]).to_dict(), config.to_dict())
    if tuple(meta["seeds"]) != tuple(seeds):
        raise ValueError(f"seeds: the checkpoint has {meta['seeds']}, this run {list(seeds)}")


def restore_run(trainer: Trainer, out: str, callbacks: Sequence,
                found: tuple[int, dict]) -> tuple[SeedState, dict]:
    """The state of checkpoint `found` (resume_point's) of run directory out, in the current
    trainer's shapes (the replay grows when the run's --steps grew and its capacity is
    derived from them); each callback gets back the state it had there."""
    index, meta = found
    # The saved run differs from this one at most in what may change on resume; of that
    # only the replay's capacity changes a shape (it follows run.steps).
    capacity = replay_rows_per_env(from_dict(meta["config"]).run)
    target_trainer = trainer
    if capacity != trainer.setup.capacity:
        saved = dataclasses.replace(trainer.setup, capacity=capacity)
        target_trainer = dataclasses.replace(
            trainer, plan=dataclasses.replace(trainer.plan, setup=saved))
    states = load_state(target_trainer, out, index, meta)
    if capacity != trainer.setup.capacity:
        from dreamerjax.data.replay import replay_grow
        replay = states.replay
        if replay.memory == "host":  # grown on the host, then put back in host memory
            replay = replay.replace(data=jax.device_get(replay.data))
        replay = replay_grow(replay, trainer.setup.capacity)
        if replay.memory == "host":
            replay = replay.replace(data=jax.device_put(
                replay.data, trainer.state_sharding().replay.data))
        states = states.replace(replay=replay)
    for cb in callbacks:
        cb.load_state_dict(meta.get("callbacks", {}).get(cb.name, {}))
    return states, meta


def load_state(trainer: Trainer, out: str, index: int, meta: dict) -> SeedState:
    """The whole state at checkpoint `index` (meta: its meta) of run directory out, in
    `trainer`'s shapes: the checkpoint's state (everything but the replay's rows) and
    the ring rebuilt from the run's replay files (run/replay_files.py)."""
    if replay_files.META_KEY not in meta:
        raise replay_files.ReplayFilesError(
            f"checkpoint {index} of {out} lists no replay files (an older version's, "
            "which held the ring): resume it with the version that wrote it, or start a "
            f"new run from its agent with --set run.from_checkpoint={out}")
    target = trainer.abstract_state()
    states = ckpt.restore(out, index, without_rows(target))
    data = replay_files.ring(out, [int(s) for s in meta["seeds"]],
                             meta[replay_files.META_KEY], target.replay)
    return states.replace(replay=states.replay.replace(data=data))


def rebuild_tensorboard(out: str, writer) -> None:
    """TensorBoard scalars rewritten from records.jsonl (after it was cut back)."""
    shutil.rmtree(os.path.join(out, records.TB_DIR), ignore_errors=True)
    for r in records.read_records(out):
        writer.add_scalars(r["seed"], r["rows"], records.tb_scalars(r))
