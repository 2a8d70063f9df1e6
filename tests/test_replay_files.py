"""The run's replay as files (run/replay_files.py): the shared small run (tests/_runs.py)
leaves one chunk stream per env in RUN/replay/seed_N, its checkpoints hold no ring row,
a resume rebuilds the ring from the chunks and the latent files bit for bit, and a chunk
that is gone is named."""

from __future__ import annotations

import shutil

import jax
import numpy as np
import pytest
from _runs import SMALL_RUN, small_config, without_timing

from dreamerjax.config.keys import ConfigError
from dreamerjax.config.resolve import make_config
from dreamerjax.data import chunks
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import driver, records, replay_files, resume
from dreamerjax.run.plan import make_plan
from dreamerjax.run.trainers import make_trainer

SEEDS = (0, 1)


def _train(out, config=None, **kw):
    return driver.train(config or small_config(), SEEDS, str(out), progress=False,
                        report=False, **kw).records


def _state(run_dir, index=None):
    config, seeds = records.read_run_config(run_dir)
    trainer = make_trainer(make_plan(config, seeds))
    index = ckpt.indices(run_dir)[-1] if index is None else index
    return resume.load_state(trainer, str(run_dir), index, ckpt.read_meta(run_dir, index))


def _bytes(x):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x).tobytes()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The small run whole (every checkpoint kept: run.checkpoint_keep all), and stopped
    at row 160 then resumed to its end (the last two kept, the default)."""
    base = tmp_path_factory.mktemp("replay_files")
    whole, split = base / "whole", base / "split"
    _train(whole, make_config("CartPole-v1", tiny=True, steps=240,
                              sets=["run.checkpoint_keep=all"], **SMALL_RUN))
    _train(split, stop_after_rows=160)
    stopped = base / "stopped"
    shutil.copytree(split, stopped)  # the run at its checkpoint of row 160
    _train(split, resume=True)
    return {"whole": whole, "split": split, "stopped": stopped}


def test_a_run_leaves_one_chunk_stream_per_env_and_seed(runs):
    whole = runs["whole"]
    config, _ = records.read_run_config(whole)
    for seed in SEEDS:
        streams = chunks.scan(replay_files.seed_dir(whole, seed))
        assert len(streams) == config.run.num_envs
        # 240 rows of 8 envs: 30 rows per env, in chunks of the 3 log intervals
        assert [s.rows for s in streams] == [30] * 8
        rows = chunks.read_streams(replay_files.seed_dir(whole, seed))
        assert all(r["is_first"][0] for r in rows)
    # the rows on disk are the ring's rows (the ring of 64 rows per env never wrapped)
    state = _state(whole)
    for seed_pos, seed in enumerate(SEEDS):
        for stream in chunks.read_streams(replay_files.seed_dir(whole, seed)):
            env = [e for e in range(8) if np.array_equal(
                np.asarray(state.replay.data["reward"][seed_pos, e, :30]), stream["reward"])
                and np.array_equal(np.asarray(state.replay.data["action"][seed_pos, e, :30]),
                                   stream["action"])]
            assert len(env) == 1


def test_checkpoints_hold_no_ring_row(runs):
    whole = runs["whole"]
    for index in ckpt.indices(whole):
        layout = ckpt._read_raw_meta(whole, index)[ckpt.LAYOUT_KEY]
        names = [entry[0] for entry in layout]
        assert any(".replay.count" in n for n in names)
        assert any(".replay.online_head" in n for n in names)
        assert not any(".replay.data" in n for n in names), names
        # and nothing as large as the ring was written: its rows are 2 seeds x 8 envs x
        # 64 slots of a CartPole row with the tiny model's latents
        state_bytes = sum(p.stat().st_size for p in
                          (whole / "checkpoints" / str(index)).rglob("*") if p.is_file())
        ring = _state(whole, index).replay.data
        ring_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(ring))
        assert state_bytes < ring_bytes + (1 << 20)


def test_a_resume_rebuilds_the_ring_bit_for_bit(runs):
    """The stopped and resumed run's final state, its ring rebuilt from the chunk and
    latent files, equals the whole run's leaf by leaf, and so do its records."""
    a, b = _state(runs["whole"]), _state(runs["split"])
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b) > 10
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert _bytes(x) == _bytes(y)
    strip = lambda recs: [without_timing(r) for r in recs]  # noqa: E731
    assert strip(records.read_records(runs["whole"])) == strip(
        records.read_records(runs["split"]))


def test_the_latent_files_carry_the_written_back_latents(runs):
    """Rows trained on after they were written to a chunk hold other latents in the ring
    than in their chunk: the rebuilt ring has the ring's (the latent files'), not the
    chunks' stale ones."""
    whole = runs["whole"]
    state = _state(whole)
    meta = ckpt.read_meta(whole, ckpt.indices(whole)[-1])[replay_files.META_KEY]
    assert meta["latents"]["0"]["0"], "no latent file listed"
    stale = 0
    for seed_pos, seed in enumerate(SEEDS):
        directory = replay_files.seed_dir(whole, seed)
        for e in range(8):
            names = replay_files._stream_tail(directory, meta["streams"][f"{seed}/{e}"],
                                              30, e)
            deter = np.concatenate([chunks.read_chunk(directory, n)["dyn/deter"]
                                    for n in names])
            ring = np.asarray(state.replay.data["deter"][seed_pos, e, :30])
            stale += int(np.any(deter != ring, axis=-1).sum())
    assert stale > 0


def test_a_deleted_chunk_is_named_on_resume(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["stopped"], run)
    directory = replay_files.seed_dir(run, 1)
    files = sorted(directory.glob("*.npz"))
    names = [chunks.ChunkName.parse(p.name) for p in files]
    # a chunk with a predecessor: the message has its whole uuid and successor; the first
    # chunk of a stream (nothing names it): its successor
    second = next(n for n in names if any(m.succ == n.uuid for m in names))
    first = next(n for n in names if not any(m.succ == n.uuid for m in names))
    for victim, want in ((second, f"*-{second.uuid}-{second.succ}-*.npz"),
                         (first, f"*-{first.succ}-*.npz")):
        shutil.rmtree(run)
        shutil.copytree(runs["stopped"], run)
        (directory / victim.filename).unlink()
        with pytest.raises(replay_files.ReplayFilesError) as err:
            _train(run, resume=True)
        message = str(err.value)
        assert "\n" not in message
        assert message.startswith(f"{directory}: chunk {want} of env "), message
        assert "is missing" in message


def test_a_damaged_chunk_is_named_on_resume(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["stopped"], run)
    victim = sorted(replay_files.seed_dir(run, 0).glob("*.npz"))[5]
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(replay_files.ReplayFilesError, match=victim.name):
        _train(run, resume=True)


def test_checkpoint_keep_all_keeps_a_series(runs):
    assert ckpt.indices(runs["whole"]) == [0, 1, 2]
    assert ckpt.indices(runs["split"]) == [1, 2]
    # every kept checkpoint resumes: each one's ring rebuilt from the files
    first = _state(runs["whole"], 1)
    assert int(np.asarray(first.replay.count).min()) == 20


def test_checkpoint_keep_is_checked_naming_the_key():
    assert make_config("CartPole-v1", sets=["run.checkpoint_keep=all"]).run.checkpoint_keep == 0
    assert make_config("CartPole-v1", sets=["run.checkpoint_keep=5"]).run.checkpoint_keep == 5
    with pytest.raises(ConfigError, match=r"^--set run.checkpoint_keep=some: "
                       r"run.checkpoint_keep: expects an int or all, got 'some'$"):
        make_config("CartPole-v1", sets=["run.checkpoint_keep=some"])
    from dreamerjax.config.validate import validate
    with pytest.raises(ConfigError, match=r"^run.checkpoint_keep: must be >= 0, got -1"):
        validate(make_config("CartPole-v1", sets=["run.checkpoint_keep=-1"]))


def test_a_checkpoint_without_replay_files_is_refused_with_the_ways_on(runs):
    """A checkpoint of an older version held the ring and lists no replay files: its
    resume is refused in one line naming the version that wrote it and
    run.from_checkpoint (a new run from its agent)."""
    run = runs["stopped"]
    config, seeds = records.read_run_config(run)
    trainer = make_trainer(make_plan(config, seeds))
    index = ckpt.indices(run)[-1]
    meta = ckpt.read_meta(run, index)
    del meta[replay_files.META_KEY]
    with pytest.raises(replay_files.ReplayFilesError) as err:
        resume.load_state(trainer, str(run), index, meta)
    message = str(err.value)
    assert "\n" not in message
    assert "the version that wrote it" in message
    assert f"--set run.from_checkpoint={run}" in message
