"""load_policy / export: a tiny trained run's policy acts as the evaluation path does, and a
policy file is data (no pickle) that is refused with the reason when it does not fit."""

import json
import shutil
import zipfile

import jax
import numpy as np
import pytest
from _runs import small_config, trained_small_run

from dreamerjax import envs as envs_lib
from dreamerjax.config import resolve as config_resolve
from dreamerjax.run import acting
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.plan import plan_of_setup
from dreamerjax.run.policy import FORMAT, EnvActions, PolicyError, export, load_policy
from dreamerjax.run.trainers import make_trainer, without_rows

SEEDS = (0, 3)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    # two seeds: the program of test_driver's whole run
    return trained_small_run(tmp_path_factory.mktemp("run") / "tiny", SEEDS)


def _play(policy, spec, spaces, key, episodes: int, mode: str):
    """acting.evaluate's episodes, stepped in Python with policy.act and the same keys."""
    k_init, k_run = jax.random.split(key)
    env, row = jax.vmap(lambda k: envs_lib.collector_init(spec, k))(
        jax.random.split(k_init, episodes))
    step = jax.jit(jax.vmap(lambda st, a, k: envs_lib.collector_step(spec, st, a, k)))
    state = policy.init(episodes)
    ret, done = np.zeros(episodes), np.zeros(episodes, bool)
    for k in jax.random.split(k_run, spec.episode_limit):
        k_pol, k_env = jax.random.split(k)
        obs = dict(row["obs"], is_first=row["is_first"])
        action, state = policy.act(obs, state, key=k_pol, mode=mode)
        env, row, _ = step(env, action, jax.random.split(k_env, episodes))
        ret += np.where(done, 0.0, np.asarray(row["reward"]))
        done |= np.asarray(row["is_last"])
    return ret


@pytest.mark.parametrize("mode", ["sample", "mode"])
def test_policy_matches_the_evaluation_path(run_dir, mode):
    from dreamerjax.run import checkpoint as ckpt

    seed = SEEDS[1]
    policy = load_policy(run_dir, seed=seed)
    setup = setup_lib.make_setup(policy.config)
    states = ckpt.restore(run_dir, ckpt.indices(run_dir)[-1],
                          without_rows(_abstract_state(setup)))
    params = jax.tree.map(lambda x: x[SEEDS.index(seed)], states.agent.params)
    # The loaded params are the checkpoint's, seed by seed.
    for a, b in zip(jax.tree.leaves(policy.params), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    key = jax.random.fold_in(jax.random.PRNGKey(seed), 1_000_000)
    episodes = 3
    want, _ = jax.jit(lambda p, k: acting.evaluate(setup, p, k, episodes,
                                                      mode == "mode"))(params, key)
    got = _play(policy, setup.spec, setup.spaces, key, episodes, mode)
    np.testing.assert_array_equal(got, np.asarray(want))
    # The exported file acts the same.
    exported = load_policy(export(run_dir, seed, run_dir.parent / "p.npz"))
    np.testing.assert_array_equal(
        _play(exported, setup.spec, setup.spaces, key, episodes, mode), got)


@pytest.mark.parametrize("mode", ["sample", "mode"])
def test_policy_matches_dreamerjax_eval(run_dir, mode, capsys):
    """`dreamerjax eval` (rundir.evaluate_run, params read alone) and load_policy's act
    give the same returns for the same keys: the evaluate_run stream's (run/streams.py)."""
    from dreamerjax.run import streams
    from dreamerjax.tools import cli

    assert cli.main(["eval", str(run_dir), "--episodes", "2", "--mode", mode]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["seed"] for r in rows] == list(SEEDS)
    for row in rows:
        policy = load_policy(run_dir, seed=row["seed"])
        setup = setup_lib.make_setup(policy.config)
        key = streams.key(row["seed"], "evaluate_run")
        got = _play(policy, setup.spec, setup.spaces, key, 2, mode)
        assert got.tolist() == row["returns"]


def _abstract_state(setup):
    trainer = make_trainer(plan_of_setup(setup, SEEDS))
    return trainer.abstract_state()


def test_export_holds_params_and_config_only(run_dir, tmp_path):
    path = export(run_dir, 0, tmp_path / "policy.npz")
    with np.load(path, allow_pickle=False) as data:
        names = data.files
        meta = json.loads(str(data["__meta__"]))
    assert all(n.startswith("params/") for n in names if n != "__meta__")
    assert not any("opt" in n or "replay" in n or "slow" in n for n in names)
    assert meta["format"] == FORMAT and meta["seed"] == 0
    assert config_resolve.from_mapping(meta["config"]) == load_policy(run_dir).config
    ckpt_bytes = sum(f.stat().st_size for f in (run_dir / "checkpoints").rglob("*")
                     if f.is_file())
    assert path.stat().st_size < ckpt_bytes / 2  # one seed, no replay, no optimiser


def test_policy_files_carry_how_the_env_takes_actions(run_dir, tmp_path):
    """The file holds the env's action mapping (EnvActions); one without it is refused,
    one of the first format (none recorded) takes it from its config's env."""
    good = export(run_dir, 0, tmp_path / "good.npz")
    policy = load_policy(good)
    assert policy.env_actions == EnvActions(discrete=True)  # CartPole: the index as is
    with pytest.raises(PolicyError, match="lacks 'env_actions'"):
        load_policy(_rewrite(good, tmp_path / "none.npz", lambda m: m.pop("env_actions")))
    with pytest.raises(PolicyError, match="bad env_actions entry"):
        load_policy(_rewrite(good, tmp_path / "bad.npz",
                             lambda m: m["env_actions"].pop("low")))
    old = load_policy(_rewrite(good, tmp_path / "v1.npz", lambda m: (
        m.pop("env_actions"), m.update(format="dreamerjax-policy/1"))))
    assert old.env_actions == policy.env_actions


def test_act_state_and_inputs(run_dir):
    policy = load_policy(run_dir, seed=0)
    state = policy.init(5)
    obs = np.zeros((5, 4), np.float32)
    a1, s1 = policy.act(obs, state)  # a bare array for the one observation key
    a2, _ = policy.act({"vector": obs}, state)
    np.testing.assert_array_equal(a1, a2)  # same state key -> same draw
    assert a1.shape == (5,) and a1.dtype == np.int32
    # raw=True: the agent's own action; a discrete env's is the index [B] int32 the actor
    # chose (as the reference's policy returns it), here CartPole's (start 0) action
    raw, _ = policy.act(obs, state, raw=True)
    assert raw.shape == (5,) and raw.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(raw), a1)
    assert not np.array_equal(np.asarray(s1["key"]), np.asarray(state["key"]))
    with pytest.raises(ValueError, match="shape"):
        policy.act(np.zeros((4, 4), np.float32), state)
    with pytest.raises(ValueError, match="mode must be one of"):
        policy.act(obs, state, mode="greedy")
    with pytest.raises(ValueError, match="lacks key 'vector'"):
        policy.act({"image": obs}, state)


def _rewrite(src, dst, meta_fn=None, arrays_fn=None):
    with np.load(src, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    if meta_fn:
        meta_fn(meta)
    if arrays_fn:
        arrays_fn(arrays)
    np.savez(dst, __meta__=np.array(json.dumps(meta)), **arrays)
    return dst


def test_bad_policy_files_are_refused_with_the_reason(run_dir, tmp_path):
    good = export(run_dir, 0, tmp_path / "good.npz")

    def refused(path, match):
        with pytest.raises(PolicyError, match=match):
            load_policy(path)

    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    refused(tmp_path / "junk.npz", "not a dreamerjax policy file: ")
    torn = tmp_path / "torn.npz"
    torn.write_bytes(good.read_bytes()[:1000])
    refused(torn, "not a dreamerjax policy file: ")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))  # a .npz of something else
    refused(tmp_path / "other.npz", r"not a dreamerjax policy file: .*other.npz \(no __meta__")
    refused(_rewrite(good, tmp_path / "fmt.npz", lambda m: m.update(format="other/9")),
            "format 'other/9'")
    refused(_rewrite(good, tmp_path / "deter.npz",
                     lambda m: m["config"].update({"dyn.rssm.deter": 128})),
            r"params/\S+ is float32\[.*\], its config needs float32")
    refused(_rewrite(good, tmp_path / "key.npz",
                     lambda m: m["config"].update({"dyn.rssm.detr": 64})),
            "unknown key 'dyn.rssm.detr'")
    refused(_rewrite(good, tmp_path / "drop.npz",
                     arrays_fn=lambda a: a.pop(next(k for k in a if "actor" in k))),
            "missing")
    refused(_rewrite(good, tmp_path / "nan.npz",
                     arrays_fn=lambda a: a.update({k: a[k] * np.nan for k in list(a)[:1]})),
            "non-finite")
    # An object array would need pickle: refused, never unpickled.
    pickled = tmp_path / "pickled.npz"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(pickled, "w") as zout:
        for item in zin.namelist():
            zout.writestr(item, zin.read(item))
        import io
        buf = io.BytesIO()
        np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
        zout.writestr("params/evil.npy", buf.getvalue())
    refused(pickled, "refused")


def test_bad_run_sources(run_dir, tmp_path):
    with pytest.raises(PolicyError, match="seed 7 was not trained"):
        load_policy(run_dir, seed=7)
    with pytest.raises(PolicyError, match="no such run directory or policy file"):
        load_policy(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyError, match="no config.json"):
        load_policy(tmp_path / "empty")
    with pytest.raises(PolicyError, match="ends in .npz"):
        export(run_dir, 0, tmp_path / "policy.bin")


def test_export_command_and_package_entry_point(run_dir, tmp_path, capsys):
    import dreamerjax
    from dreamerjax.tools import cli

    out = tmp_path / "cli.npz"
    assert cli.main(["export", str(run_dir), "--seed", "3", "--out", str(out)]) == 0
    assert "policy of seed 3" in capsys.readouterr().out
    policy = dreamerjax.load_policy(out)
    assert policy.seed == 3 and policy.config == load_policy(run_dir, seed=3).config
    assert load_policy(out, seed=3).seed == 3
    with pytest.raises(PolicyError, match="holds seed 3 alone, not seed 0"):
        load_policy(out, seed=0)  # the file holds one seed: another is refused
    assert cli.main(["export", str(run_dir), "--seed", "9", "--out", str(out)]) == 2
    assert "seed 9 was not trained" in capsys.readouterr().err
    assert cli.main(["export", str(run_dir), "--out", str(tmp_path / "p.bin")]) == 2


def test_a_damaged_latest_checkpoint_is_skipped_with_a_warning(run_dir, tmp_path, capsys):
    """load_policy verifies what it reads (the sha256 manifest): a byte flipped in the
    newest checkpoint makes it load the previous one, warned, and leave the files alone."""
    from dreamerjax.run import checkpoint as ckpt

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    first, last = ckpt.indices(copy)[-2:]
    files = [p for p in (copy / "checkpoints" / str(last)).rglob("*") if p.is_file()]
    target = max(files, key=lambda p: p.stat().st_size)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    policy = load_policy(copy, seed=SEEDS[0])
    assert policy.source.endswith(f"checkpoint {first}")
    err = capsys.readouterr().err
    assert f"checkpoint {last} of {copy} is damaged" in err
    assert target.exists() and ckpt.indices(copy)[-1] == last  # nothing moved or deleted
    target.unlink()  # the other one damaged too: refused with the reason
    for p in (copy / "checkpoints" / str(first)).rglob("*"):
        if p.is_file() and p.stat().st_size > 1000:
            p.write_bytes(b"0" * p.stat().st_size)
    with pytest.raises(PolicyError, match="no good checkpoint"):
        load_policy(copy, seed=SEEDS[0])


def test_a_checkpoint_of_one_array_per_leaf_gives_the_same_policy(run_dir, tmp_path,
                                                                   monkeypatch):
    """Checkpoints without the packed layout (written before it, or by a multi-process
    run) are read with orbax's partial restore of the params: the same policy."""
    from dreamerjax.run import checkpoint as ckpt

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    last = ckpt.indices(copy)[-1]
    setup = setup_lib.make_setup(small_config())
    state = ckpt.restore(copy, last, without_rows(_abstract_state(setup)))
    monkeypatch.setattr(ckpt, "_pack", lambda state: None)
    ckpt.save(copy, last + 1, state, ckpt.read_meta(copy, last))
    assert ckpt.read_leaves(copy, last + 1, []) is None
    for seed in SEEDS:
        packed, per_leaf = load_policy(run_dir, seed=seed), load_policy(copy, seed=seed)
        assert per_leaf.source.endswith(f"checkpoint {last + 1}")
        jax.tree.map(np.testing.assert_array_equal, per_leaf.params, packed.params)


def test_a_chosen_checkpoint_as_evaluate_takes_it(run_dir):
    """load_policy takes a kept checkpoint as evaluate and `dreamerjax eval` do: by
    `checkpoint=K` or as the path RUN/checkpoints/K; the params are that checkpoint's
    (the newest one's by default), and a checkpoint that is not kept is refused naming
    the kept ones."""
    from dreamerjax.run import checkpoint as ckpt

    first, last = ckpt.indices(run_dir)[-2:]
    seed = SEEDS[1]
    by_number = load_policy(run_dir, seed=seed, checkpoint=first)
    by_path = load_policy(run_dir / "checkpoints" / str(first), seed=seed)
    latest = load_policy(run_dir, seed=seed)
    assert by_number.source == by_path.source == f"{run_dir} checkpoint {first}"
    assert latest.source == f"{run_dir} checkpoint {last}"
    for a, b in zip(jax.tree.leaves(by_number.params), jax.tree.leaves(by_path.params),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert any(not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(
        jax.tree.leaves(by_number.params), jax.tree.leaves(latest.params), strict=True))
    with pytest.raises(PolicyError, match=rf"checkpoint 9: not kept .*kept: {first}, {last}"):
        load_policy(run_dir, checkpoint=9)
    with pytest.raises(PolicyError, match="checkpoint 'all': load_policy takes one"):
        load_policy(run_dir, checkpoint="all")
    with pytest.raises(PolicyError, match=rf"checkpoints/{first} is checkpoint {first}, "
                                          f"not {last}"):
        load_policy(run_dir / "checkpoints" / str(first), checkpoint=last)
