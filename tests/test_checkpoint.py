"""checkpoint.py: round trip incl. typed PRNG keys, the packed state and checkpoints of one
array per leaf, atomic writes, keep-last-2, config check."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.config.defaults import Config, RunConfig
from dreamerjax.run import checkpoint as ckpt


def _state(seed=0):
    return {
        "params": {"w": jnp.arange(6.0).reshape(2, 3) + seed, "b": jnp.ones((3,), jnp.bfloat16)},
        "key": jax.random.split(jax.random.key(seed), 2),  # typed keys [2]
        "raw_key": jax.random.PRNGKey(seed),  # uint32[2]
        "count": jnp.int32(7 + seed),
        "flags": jnp.array([True, False]),
    }


def _zeros_like(state):
    def z(x):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.split(jax.random.key(123), x.shape[0])
        return jnp.zeros_like(x)

    return jax.tree.map(z, state)


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


def test_round_trip_with_prng_keys(tmp_path):
    state = _state(1)
    meta = {"rows": 2000, "updates": np.int64(481), "wall_s": float("nan"),
            "tracker": {"seeds": {"1": {"0": [[3, 7], [3.0, 4.0]]}}}}
    ckpt.save(tmp_path, 0, state, meta)
    index, got_meta = ckpt.latest_verified(tmp_path)
    assert index == 0
    assert got_meta == {"rows": 2000, "updates": 481, "wall_s": None,
                        "tracker": {"seeds": {"1": {"0": [[3, 7], [3.0, 4.0]]}}}}
    restored = ckpt.restore(tmp_path, 0, _zeros_like(state))
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    assert jnp.issubdtype(restored["key"].dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]),
                                  jax.random.key_data(state["key"]))
    # the restored key draws the same numbers as the saved one
    np.testing.assert_array_equal(jax.random.uniform(restored["key"][1], (4,)),
                                  jax.random.uniform(state["key"][1], (4,)))
    for name in ("raw_key", "count", "flags"):
        np.testing.assert_array_equal(restored[name], state[name])
        assert restored[name].dtype == state[name].dtype
    assert restored["params"]["b"].dtype == jnp.bfloat16
    np.testing.assert_array_equal(restored["params"]["w"], state["params"]["w"])
    # abstract targets work too (shape / dtype / sharding only)
    again = ckpt.restore(tmp_path, 0, jax.eval_shape(lambda: _zeros_like(state)))
    np.testing.assert_array_equal(again["params"]["w"], state["params"]["w"])
    # nothing written outside run_dir/checkpoints
    assert all(p.startswith("checkpoints" + os.sep) for p in _files(tmp_path))


def test_small_leaves_are_packed_by_dtype_and_large_ones_saved_alone(tmp_path):
    """The state item holds one flat array per dtype for the small leaves, and the large
    leaves and typed keys as arrays of their own; the layout names every leaf."""
    big = jnp.arange(ckpt.PACK_BELOW // 4, dtype=jnp.float32).reshape(-1, 4)  # 1 MiB
    state = {**_state(2), "big": big, "more": [jnp.full((3,), i, jnp.float32)
                                               for i in range(5)]}
    ckpt.save(tmp_path, 0, state, {"rows": 1})
    layout = ckpt._read_raw_meta(tmp_path, 0)[ckpt.LAYOUT_KEY]
    flat = jax.tree_util.tree_leaves_with_path(state)
    assert [e[0] for e in layout] == [jax.tree_util.keystr(p) for p, _ in flat]
    arrays = {e[0]: e[1] for e in layout}
    assert arrays["['big']"].startswith("leaf_") and arrays["['key']"].startswith("leaf_")
    assert arrays["['params']['w']"] == arrays["['more'][4]"] == "packed_float32"
    assert arrays["['params']['b']"] == "packed_bfloat16"
    assert arrays["['flags']"] == "packed_bool"
    assert ckpt.read_meta(tmp_path, 0) == {"rows": 1}  # the layout is the module's own
    restored = ckpt.restore(tmp_path, 0, _zeros_like(state))
    for (path, want), got in zip(flat, jax.tree.leaves(restored), strict=True):
        if jnp.issubdtype(want.dtype, jax.dtypes.prng_key):
            want, got = jax.random.key_data(want), jax.random.key_data(got)
        assert got.dtype == want.dtype and isinstance(got, jax.Array), path
        np.testing.assert_array_equal(got, want)
    # Leaves read alone, from their packed group or their own array.
    alone = ckpt.read_leaves(tmp_path, 0, ["['more'][3]", "['big']"])
    np.testing.assert_array_equal(alone["['more'][3]"], [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(alone["['big']"], big)
    with pytest.raises(KeyError):
        ckpt.read_leaves(tmp_path, 0, ["['missing']"])


def test_a_checkpoint_of_one_array_per_leaf_still_restores(tmp_path, monkeypatch):
    """Checkpoints written before the packed layout, and by multi-process runs (orbax
    writes each process's shards), hold one array per leaf and no layout."""
    monkeypatch.setattr(ckpt, "_pack", lambda state: None)
    state = _state(4)
    ckpt.save(tmp_path, 0, state, {"rows": 1})
    assert ckpt.LAYOUT_KEY not in ckpt._read_raw_meta(tmp_path, 0)
    monkeypatch.undo()
    restored = ckpt.restore(tmp_path, 0, _zeros_like(state))
    np.testing.assert_array_equal(restored["params"]["w"], state["params"]["w"])
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]),
                                  jax.random.key_data(state["key"]))
    assert ckpt.read_leaves(tmp_path, 0, ["['count']"]) is None
    assert ckpt.verify(tmp_path, 0) is None


@pytest.mark.parametrize("change", ["name", "shape", "dtype", "extra", "subset"])
def test_a_state_of_another_structure_is_refused_with_the_leaf(tmp_path, change):
    state = _state(0)
    ckpt.save(tmp_path, 0, state, {})
    target = dict(_zeros_like(state))
    if change == "name":
        target["counter"] = target.pop("count")
    elif change == "shape":
        target["flags"] = jnp.zeros((3,), bool)
    elif change == "dtype":
        target["count"] = jnp.zeros((), jnp.float32)
    elif change == "extra":
        target["extra"] = jnp.zeros(())
    else:
        target = {"params": {"w": jnp.zeros((2, 3))}}
    match = {"name": "'count'", "shape": "'flags'", "dtype": "'count'"}.get(
        change, "arrays saved")
    with pytest.raises(ValueError, match=f"does not fit the target state.*{match}"):
        ckpt.restore(tmp_path, 0, target)


def test_no_checkpoints_without_checkpoints(tmp_path):
    assert ckpt.indices(tmp_path) == []
    assert ckpt.indices(tmp_path / "missing") == []
    assert not (tmp_path / "missing").exists()


def test_keep_last_two(tmp_path):
    for i in range(4):
        ckpt.save(tmp_path, i, _state(i), {"i": i})
    assert ckpt.indices(tmp_path) == [2, 3]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["2", "3"]
    index, meta = ckpt.latest_verified(tmp_path)
    assert (index, meta) == (3, {"i": 3})
    older = ckpt.restore(tmp_path, 2, _zeros_like(_state()))
    assert int(older["count"]) == 9
    with pytest.raises(FileExistsError):
        ckpt.save(tmp_path, 3, _state(), {})


# orbax's event loop may report the abandoned write of the other item after the failure.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_interrupted_save_leaves_no_checkpoint(tmp_path, monkeypatch):
    import orbax.checkpoint as ocp

    ckpt.save(tmp_path, 0, _state(0), {"i": 0})

    async def fail(self, *args, **kwargs):
        raise RuntimeError("disk full (simulated)")

    monkeypatch.setattr(ocp.JsonCheckpointHandler, "async_save", fail)
    with pytest.raises(RuntimeError, match="simulated"):
        ckpt.save(tmp_path, 1, _state(1), {"i": 1})
    monkeypatch.undo()
    # no directory named 1: latest is still 0
    assert "1" not in os.listdir(tmp_path / "checkpoints")
    assert ckpt.indices(tmp_path) == [0]
    assert ckpt.latest_verified(tmp_path) == (0, {"i": 0})
    # a later save succeeds and clears any temporary leftovers
    ckpt.save(tmp_path, 2, _state(2), {"i": 2})
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["0", "2"]
    assert ckpt.latest_verified(tmp_path) == (2, {"i": 2})


def test_killed_save_leftover_is_ignored(tmp_path):
    ckpt.save(tmp_path, 0, _state(0), {"i": 0})
    # what a process killed mid-save leaves behind
    partial = tmp_path / "checkpoints" / "1.orbax-checkpoint-tmp"
    (partial / "state").mkdir(parents=True)
    assert ckpt.latest_verified(tmp_path) == (0, {"i": 0})
    restored = ckpt.restore(tmp_path, 0, _zeros_like(_state()))
    assert int(restored["count"]) == 7


def _cfg(**run):
    import dataclasses

    return Config(run=dataclasses.replace(RunConfig(), **run)).to_dict()


def test_check_compatible():
    base = _cfg(replay_capacity=5000)
    ckpt.check_compatible(base, base)
    # steps may grow (explicit replay capacity), checkpoint_every may change
    ckpt.check_compatible(base, _cfg(replay_capacity=5000, steps=40000, checkpoint_every=3))
    with pytest.raises(ValueError, match="may only grow"):
        ckpt.check_compatible(base, _cfg(replay_capacity=5000, steps=10000))
    with pytest.raises(ValueError) as err:
        ckpt.check_compatible(base, _cfg(replay_capacity=5000, num_envs=8, train_ratio=64.0))
    assert "run.num_envs" in str(err.value) and "run.train_ratio" in str(err.value)
    other = dict(base, size="12m")
    other["agent"] = dict(base["agent"], horizon=100)
    with pytest.raises(ValueError) as err:
        ckpt.check_compatible(base, other)
    assert "size" in str(err.value) and "agent.horizon" in str(err.value)
    # capacity derived from steps (0): growing steps grows the ring (driver.restore_run)
    ckpt.check_compatible(_cfg(), _cfg(steps=40000))
    # a field added since the checkpoint was written is fine at its default only
    old = _cfg()
    del old["run"]["train_fill"]
    ckpt.check_compatible(old, _cfg())
    with pytest.raises(ValueError, match="run.train_fill"):
        ckpt.check_compatible(old, _cfg(train_fill=100))
    # a key present on one side only
    with pytest.raises(ValueError, match="seeds"):
        ckpt.check_compatible(dict(base, seeds=[0]), base)


# ----------------------------------------------------------------------------- damage


def _largest_state_file(run_dir, index):
    files = [p for p in (run_dir / "checkpoints" / str(index) / "state").rglob("*")
             if p.is_file()]
    return max(files, key=lambda p: p.stat().st_size)


def _three(tmp_path):
    for i in range(3):
        ckpt.save(tmp_path, i, _state(i), {"i": i})
    assert ckpt.indices(tmp_path) == [1, 2]
    return tmp_path


def test_every_checkpoint_has_a_manifest_that_verifies(tmp_path):
    _three(tmp_path)
    for i in (1, 2):
        manifest = tmp_path / "checkpoints" / str(i) / ckpt.MANIFEST
        files = json.loads(manifest.read_text())["files"]
        assert any(name.startswith("state/") for name in files)
        assert any(name.startswith("meta/") for name in files)
        assert ckpt.verify(tmp_path, i) is None
    # the meta handed back is the one saved (the manifest flag is ours)
    assert ckpt.read_meta(tmp_path, 2) == {"i": 2}


@pytest.mark.parametrize("damage", ["truncate", "flip", "remove", "no_manifest", "meta"])
def test_a_damaged_latest_falls_back_to_the_previous(tmp_path, damage):
    _three(tmp_path)
    target = _largest_state_file(tmp_path, 2)
    if damage == "truncate":
        os.truncate(target, target.stat().st_size // 2)
    elif damage == "flip":
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        target.write_bytes(bytes(data))
    elif damage == "remove":
        target.unlink()
    elif damage == "no_manifest":  # killed between orbax's commit and the manifest
        (tmp_path / "checkpoints" / "2" / ckpt.MANIFEST).unlink()
    else:
        (tmp_path / "checkpoints" / "2" / "meta" / "metadata").write_text('{"i": ')
    assert ckpt.verify(tmp_path, 2) is not None
    warnings = []
    found, damaged = ckpt.latest_good(tmp_path, warn=warnings.append)
    assert found == (1, {"i": 1}) and damaged == [2]
    assert len(warnings) == 1 and "checkpoint 2" in warnings[0]
    assert "resuming from checkpoint 1" in warnings[0] and "\n" not in warnings[0]
    restored = ckpt.restore(tmp_path, 1, _zeros_like(_state()))
    assert int(restored["count"]) == 8
    # set aside (not deleted), so the index can be saved again
    moved = ckpt.set_aside(tmp_path, damaged)
    assert moved[0].parent == tmp_path / ckpt.DAMAGED_DIR and moved[0].is_dir()
    assert ckpt.indices(tmp_path) == [1]
    ckpt.save(tmp_path, 2, _state(2), {"i": 2})
    assert ckpt.latest_good(tmp_path) == ((2, {"i": 2}), [])


def test_no_good_checkpoint_is_a_clear_error_and_deletes_nothing(tmp_path):
    _three(tmp_path)
    for i in (1, 2):
        os.truncate(_largest_state_file(tmp_path, i), 3)
    before = _files(tmp_path)
    with pytest.raises(ckpt.NoGoodCheckpoint) as err:
        ckpt.latest_good(tmp_path, warn=pytest.fail)
    message = str(err.value)
    assert "no good checkpoint" in message and "Nothing was deleted" in message
    assert "2: state/" in message and "1: state/" in message and "\n" not in message
    assert _files(tmp_path) == before


def test_latest_good_of_a_run_without_checkpoints(tmp_path):
    assert ckpt.latest_good(tmp_path) == (None, [])


def test_join_until_waits_for_a_thread_that_has_not_started_yet():
    """The tidy-up after a failed save joins orbax's new threads; one listed by
    threading.enumerate() before it runs must be waited for, not raise (under load it
    raised 'cannot join thread before it is started' and hid the save's own error)."""
    import threading
    import time

    ran = []
    worker = threading.Thread(target=lambda: ran.append(1))
    threading.Timer(0.05, worker.start).start()
    ckpt._join_until(worker, time.monotonic() + 10)
    assert ran == [1] and not worker.is_alive()


def _two_process_layout():
    """The meta's layout a run of 2 processes with 1 device each writes (run_layout)."""
    return {"processes": 2, "devices_per_process": 1, "mesh": {"seed": 2}}


def test_the_meta_records_the_layout_and_a_resume_with_another_is_refused(tmp_path):
    one = ckpt.run_layout(None)
    assert one == {"processes": 1, "devices_per_process": 1, "mesh": {}}
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("seed",))
    assert ckpt.run_layout(mesh) == {"processes": 1, "devices_per_process": 1,
                                     "mesh": {"seed": 1}}
    ckpt.check_layout(tmp_path, one)  # no checkpoint: nothing to check
    ckpt.save(tmp_path, 0, _state(), {"rows": 80})  # written before layouts were recorded
    ckpt.check_layout(tmp_path, one)
    ckpt.save(tmp_path, 1, _state(), {"rows": 160, ckpt.LAYOUT_META: _two_process_layout()})
    ckpt.check_layout(tmp_path, _two_process_layout())
    with pytest.raises(ValueError) as e:
        ckpt.check_layout(tmp_path, one)
    assert str(e.value) == (
        f"--resume {tmp_path}: the run was made with 2 processes x 1 device (mesh seed=2); "
        "this resume has 1 process x 1 device (mesh none): resume it with the processes "
        "and devices it was made with (--distributed --num-processes 2, --devices, "
        "--data-devices)")
    # over several processes the devices count too; in one process they may change
    other = {"processes": 2, "devices_per_process": 2, "mesh": {"seed": 2, "data": 2}}
    with pytest.raises(ValueError, match="this resume has 2 processes x 2 devices"):
        ckpt.check_layout(tmp_path, other)
    ckpt.save(tmp_path, 2, _state(), {"rows": 240, ckpt.LAYOUT_META: {
        "processes": 1, "devices_per_process": 2, "mesh": {"seed": 2}}})
    ckpt.check_layout(tmp_path, one)


def test_resume_of_a_two_process_run_in_one_process_is_one_line(tmp_path, capsys,
                                                                 monkeypatch):
    """`dreamerjax train --resume` of a run whose checkpoint says 2 processes, in one
    process: refused in one line before the trainer is built (nothing compiles)."""
    from _runs import small_config

    from dreamerjax.run import driver, records
    from dreamerjax.tools import cli

    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(records.config_file(small_config(), (0,))))
    ckpt.save(out, 0, _state(), {"rows": 80, ckpt.LAYOUT_META: _two_process_layout()})

    def built(*args, **kwargs):
        raise AssertionError("the trainer was built")

    monkeypatch.setattr(driver, "make_trainer", built)
    assert cli.main(["train", "--resume", str(out), "--no-precompile"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dreamerjax train: error: --resume ")
    assert "made with 2 processes x 1 device (mesh seed=2); this resume has 1 process" in err
