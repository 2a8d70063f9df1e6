"""Replay directories from the command line and the run: `dreamerjax replay export` of a
run's replay, `replay info`, and `train --replay-from DIR [--offline]` filling a fresh
run's replay from one (data/replay_dir.py, run/replay_io.py)."""

from __future__ import annotations

import hashlib
import pathlib
import shutil
import struct
import subprocess
import sys
import zipfile

import jax
import numpy as np
import pytest
from _runs import small_argv, small_config

from dreamerjax.data import chunks, replay_dir
from dreamerjax.data import replay as replay_lib
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import driver, replay_io
from dreamerjax.run.setup import make_setup
from dreamerjax.tools.cli import main

FORMAT = pathlib.Path(__file__).resolve().parent / "data" / "replay_format"
SEEDS = (0, 1)


def _tree_digest(directory: pathlib.Path) -> dict:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The shared small run of CartPole, seeds 0 and 1 (rows 240: 30 per env, in its
    replay's chunk folders RUN/replay/seed_N)."""
    out = tmp_path_factory.mktemp("replay_dir") / "run"
    driver.train(small_config(), SEEDS, str(out), progress=False)
    return out


@pytest.fixture(scope="module")
def exported(run, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "replay"
    before = _tree_digest(run)
    assert main(["replay", "export", str(run), str(out)]) == 0
    assert _tree_digest(run) == before  # nothing in the run changed
    return out


def _ring(run):
    """{key path: array} of the replay at the run's latest checkpoint, its ring rebuilt
    from the run's replay files (resume.load_state)."""
    from dreamerjax.run import records, resume
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer

    config, seeds = records.read_run_config(run)
    index, meta = ckpt.latest_verified(run)
    state = resume.load_state(make_trainer(make_plan(config, seeds)), str(run), index, meta)
    return {jax.tree_util.keystr(p): np.asarray(x)
            for p, x in jax.tree_util.tree_leaves_with_path(state)
            if jax.tree_util.keystr(p).startswith(".replay.")}


# An export holds each row's latents as they were when the row went to its chunk (as the
# reference's saved chunks do); the latents the training wrote back since are in the run's
# RUN/replay/seed_N/latents files, which a resume applies and an export does not.
LATENTS = (".replay.data['deter']", ".replay.data['stoch']")


def test_export_writes_every_env_of_every_seed_as_the_ring_holds_it(run, exported):
    ring = _ring(run)
    count = ring[".replay.count"]
    assert count.shape == (2, 8) and (count == 30).all()
    assert sorted(p.name for p in exported.iterdir()) == ["seed_0", "seed_1"]
    setup = make_setup(small_config())
    obs, action, deter, stoch = replay_io._spec(setup)
    for s, seed in enumerate(SEEDS):
        streams = chunks.read_streams(exported / f"seed_{seed}")
        assert len(streams) == 8
        assert chunks.chunk_format(streams[0]) == "e3f0224"  # replay_context 1: latents
        assert streams[0]["dyn/stoch"].shape == (30, setup.config.agent.rssm.stoch,
                                                 setup.config.agent.rssm.classes)
        for e, stream in enumerate(streams):
            rows = chunks.schema_rows(stream, obs, action, deter, stoch)
            for name, value in ring.items():
                if not name.startswith(".replay.data") or name in LATENTS:
                    continue
                keys = name[len(".replay.data"):].strip("[]'").split("']['")
                mine = rows
                for key in keys:
                    mine = mine[key]
                np.testing.assert_array_equal(mine, value[s, e, :30], err_msg=name)


def test_export_refuses_a_directory_in_use_or_inside_the_run(run, exported, capsys):
    assert main(["replay", "export", str(run), str(exported)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["replay", "export", str(run), str(run / "replay_copy")]) == 2
    err = capsys.readouterr().err
    assert "inside the run directory" in err and len(err.strip().splitlines()) == 1
    assert not (run / "replay_copy").exists()


def test_replay_info(exported, capsys):
    assert main(["replay", "info", str(exported)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("seed_0: e3f0224 format, 8 streams, 240 rows")
    assert any(line.split()[:3] == ["vector", "float32", "(4,)"] for line in out)
    assert out[-1].startswith("seed_1: e3f0224 format, 8 streams, 240 rows")
    assert main(["replay", "info", str(FORMAT / "29eb964")]) == 0
    assert "29eb964 format, 2 streams, 40 rows" in capsys.readouterr().out
    assert main(["replay", "info", str(exported.parent / "nothing")]) == 2
    assert "no such replay directory" in capsys.readouterr().err


def test_fill_gives_the_ring_the_run_had(run, exported):
    ring = _ring(run)
    setup = make_setup(small_config())
    obs, action, deter, stoch = replay_io._spec(setup)
    loaded = replay_dir.load_rows(exported, 1, 8, obs, action, deter, stoch)
    assert loaded.streams == 8 and loaded.rows["reward"].shape == (8, 30)
    example = jax.tree.map(lambda v: np.zeros(v.shape[1:], v.dtype),
                           jax.tree.map(lambda v: v[0], loaded.rows))
    empty = replay_lib.replay_init(8, setup.capacity, example, setup.window_length)
    filled = replay_lib.replay_fill(empty, loaded.rows, online=False)
    np.testing.assert_array_equal(filled.count, ring[".replay.count"][1])
    np.testing.assert_array_equal(filled.data["obs"]["vector"],
                                  ring[".replay.data['obs']['vector']"][1])
    np.testing.assert_array_equal(filled.data["action"], ring[".replay.data['action']"][1])
    stream = chunks.read_streams(exported / "seed_1")[3]  # the latents as exported
    np.testing.assert_array_equal(filled.data["deter"][3, :30], stream["dyn/deter"])


def test_streams_of_another_shape_are_dealt_by_episode(exported):
    setup = make_setup(small_config())
    obs, action, deter, stoch = replay_io._spec(setup)
    loaded = replay_dir.load_rows(exported / "seed_0", 0, 3, obs, action, deter, stoch)
    rows = loaded.rows
    assert rows["reward"].shape[0] == 3
    assert rows["is_first"][:, 0].all()  # every env begins with an episode
    # Each env's rows are whole episodes of the streams, one after another.
    streams = chunks.read_streams(exported / "seed_0")
    episodes = set()
    for stream in streams:
        starts = [*np.flatnonzero(stream["is_first"]), len(stream["reward"])]
        for a, b in zip(starts[:-1], starts[1:], strict=True):
            episodes.add(stream["vector"][a:b].tobytes())
    for env in range(3):
        starts = np.flatnonzero(rows["is_first"][env])
        for a, b in zip(starts[:-1], starts[1:], strict=True):
            assert rows["obs"]["vector"][env, a:b].tobytes() in episodes


def test_train_from_a_replay_directory_online_and_offline(run, exported, tmp_path):
    online = tmp_path / "online"
    result = driver.train(small_config(replay_from=str(exported)), SEEDS, str(online),
                          progress=False)
    assert result.records[-1]["updates"] > 0
    # The loaded 30 rows per env, then the run's own 30.
    assert (_ring(online)[".replay.count"] == 60).all()
    offline = tmp_path / "offline"
    before = _tree_digest(exported)
    result = driver.train(small_config(replay_from=str(exported), offline=True), SEEDS,
                          str(offline), progress=False)
    ring = _ring(offline)
    assert (ring[".replay.count"] == 30).all()  # no env step: the loaded rows alone
    # The schedule's updates for 240 rows (tests/_runs.py), on the loaded rows.
    assert [r["updates"] for r in result.records[-2:]] == [55, 55]
    assert all(np.isfinite(r["eval_mean"]) for r in result.records)
    np.testing.assert_array_equal(ring[".replay.data['obs']['vector']"],
                                  _ring(run)[".replay.data['obs']['vector']"])
    assert _tree_digest(exported) == before


def test_train_refuses_a_replay_of_other_observations_before_compiling(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", *small_argv(), "--out", str(out),
                 "--replay-from", str(FORMAT / "e3f0224")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "'vector' is float32 (3,), the config needs float32 (4,)" in err
    assert "--replay-from" in err and not out.exists()
    code = main(["train", *small_argv(), "--out", str(out), "--offline"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--replay-from" in err and not out.exists()


def test_fill_keeps_a_host_replay_in_host_memory(run, exported):
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer

    config = small_config(replay_from=str(exported), replay_memory="host")
    trainer = make_trainer(make_plan(config, SEEDS))
    states = replay_io.fill_states(trainer.init(), trainer.setup, SEEDS)
    kinds = {x.sharding.memory_kind for x in jax.tree.leaves(states.replay.data)}
    assert kinds == {"pinned_host"}
    ring = _ring(run)
    np.testing.assert_array_equal(np.asarray(states.replay.count), ring[".replay.count"])
    np.testing.assert_array_equal(np.asarray(states.replay.data["reward"]),
                                  ring[".replay.data['reward']"])
    trainer.close()


# --- a run directory for its replay; damaged chunks and missing seed folders named --------


def test_a_run_directory_is_taken_for_its_replay(run, exported, tmp_path, capsys):
    assert replay_dir.folders(run) == replay_dir.folders(run / "replay")
    assert main(["replay", "info", str(run)]) == 0
    by_run = capsys.readouterr().out
    assert main(["replay", "info", str(run / "replay")]) == 0
    assert capsys.readouterr().out == by_run and by_run.startswith("seed_0: ")
    # --replay-from RUN: checked and loaded as RUN/replay
    setup = make_setup(small_config(replay_from=str(run)))
    replay_io.check(setup, SEEDS)
    spec = replay_io._spec(setup)
    a = replay_dir.load_rows(run, 1, 8, *spec)
    b = replay_dir.load_rows(run / "replay", 1, 8, *spec)
    assert a.folder == b.folder == run / "replay" / "seed_1"
    np.testing.assert_array_equal(a.rows["obs"]["vector"], b.rows["obs"]["vector"])
    # export of RUN/replay: the run's, as export of RUN
    assert main(["replay", "export", str(run / "replay"), str(tmp_path / "again")]) == 0
    assert _tree_digest(tmp_path / "again") == _tree_digest(exported)
    capsys.readouterr()
    # neither a replay nor a run's: the one line says where a replay is
    (tmp_path / "empty").mkdir()
    assert main(["replay", "info", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "RUN/replay" in err


def test_a_script_reads_a_run_directory_without_the_run_layer_or_jax(run):
    """What `replay info` does (describe), and a script's read of every stream, import
    neither dreamerjax.run nor JAX."""
    code = ("import sys; from dreamerjax.data import chunks, replay_dir; "
            f"lines = replay_dir.describe({str(run)!r}); "
            f"rows = [chunks.read_streams(f) for f in replay_dir.folders({str(run)!r}).values()]; "
            "assert lines[0].startswith('seed_0: ') and len(rows) == 2 and len(rows[0]) == 8; "
            "bad = sorted(m for m in sys.modules if m.startswith(('dreamerjax.run', 'jax'))); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def _damage(path: pathlib.Path, member: str = "vector.npy", count: int = 60) -> None:
    """Zero `count` bytes of `member`'s compressed data inside the chunk file `path` (its
    other members stay readable)."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    raw = bytearray(path.read_bytes())
    # A member's data follows its local header: 30 bytes, then its name and extra field.
    name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:
                                                   info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len
    n = min(count, info.compress_size)
    raw[start:start + n] = bytes(n)
    path.write_bytes(raw)


def _copy_run(run: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("*.lock", "lock"))
    return copy


def _a_later_chunk(folder: pathlib.Path) -> pathlib.Path:
    """A chunk of the folder's first stream that is not the stream's first."""
    return folder / chunks.scan(folder)[0].names[-1].filename


def _without_lock(directory: pathlib.Path) -> dict:
    return {k: v for k, v in _tree_digest(directory).items() if "lock" not in k}


def _each_refused_in_one_line(argvs, names: str, capsys) -> str:
    """Each command exits 2 with one stderr line holding `names`, before any compile; the
    last command's line."""
    for argv in argvs:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, (argv, err)
        assert names in err, (argv, err)
        assert "compiling" not in err
    return err


def test_a_damaged_chunk_is_named_by_info_export_and_resume(run, tmp_path, capsys):
    copy = _copy_run(run, tmp_path)
    bad = _a_later_chunk(copy / "replay" / "seed_1")
    _damage(bad)
    before = _without_lock(copy)
    err = _each_refused_in_one_line(
        (["replay", "info", str(copy / "replay")],
         ["replay", "export", str(copy), str(tmp_path / "out")],
         ["train", "--resume", str(copy), "--steps", "320"]), f"{bad}: damaged chunk", capsys)
    assert "run.from_checkpoint" in err  # the resume's line names what can be done
    assert _without_lock(copy) == before  # nothing lost
    assert not (tmp_path / "out").exists()
    # --replay-from reads every chunk before compiling, as the resume does
    new = tmp_path / "new"
    assert main(["train", *small_argv(), "--seeds", "0", "1", "--out", str(new),
                 "--replay-from", str(copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{bad}: damaged chunk" in err, err
    assert "--replay-from" in err and "compiling" not in err and not new.exists()


def test_a_missing_seed_folder_is_named_by_export_and_resume(run, tmp_path, capsys):
    copy = _copy_run(run, tmp_path)
    shutil.rmtree(copy / "replay" / "seed_0")
    before = _without_lock(copy)
    err = _each_refused_in_one_line(
        (["replay", "export", str(copy), str(tmp_path / "out")],
         ["train", "--resume", str(copy), "--steps", "320"]),
        f"{copy / 'replay' / 'seed_0'}: missing", capsys)
    assert "run.from_checkpoint" in err
    assert _without_lock(copy) == before
    assert not (tmp_path / "out").exists()
