"""run.from_checkpoint: a new run starts from another run's agent (all its parameters or
those run.from_checkpoint_regex selects), with its own replay, optimiser and step counter;
a source that cannot serve is refused in one line naming the key, before compiling."""

import dataclasses

import jax
import numpy as np
import pytest
from _runs import small_config, trained_small_run

from dreamerjax.config.keys import ConfigError
from dreamerjax.config.resolve import resolve
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import transfer
from dreamerjax.run.plan import make_plan
from dreamerjax.run.policy import _flat_params, stacked_params
from dreamerjax.run.trainers import make_trainer

SEEDS = (0, 3)


def _from(cfg, source, regex: str = ""):
    return dataclasses.replace(cfg, run=dataclasses.replace(
        cfg.run, from_checkpoint=str(source), from_checkpoint_regex=regex))


def _params(run_dir, seeds, config=None):
    """{name: [seeds, ...]} of a run's latest verified checkpoint."""
    config = config or small_config()
    plan = make_plan(small_config(), seeds)
    index = ckpt.latest_verified(run_dir)[0]
    return {k: np.asarray(v) for k, v in _flat_params(stacked_params(
        run_dir, index, config, plan.setup.spaces, len(seeds))).items()}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return trained_small_run(tmp_path_factory.mktemp("source") / "tiny", SEEDS)


def test_a_new_run_starts_from_the_source_agent(source, tmp_path, monkeypatch):
    from dreamerjax.run import driver

    # Seed 3 was trained by the source (its own parameters), seed 5 was not (the source's
    # first seed's). One log point of 80 rows has no update (the gate opens at row 132),
    # so its checkpoint holds the parameters the run started with.
    out = tmp_path / "new"
    checks, real = [], transfer.check

    def check(*args, **kwargs):  # the real check, counted
        checks.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(transfer, "check", check)
    records = driver.train(_from(small_config(steps=80), source), (3, 5), str(out),
                           progress=False).records
    assert [r["updates"] for r in records] == [0, 0]
    assert len(checks) == 1  # by the plan; the start loads the plan's source
    want, got = _params(source, SEEDS), _params(out, (3, 5))
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name][0], want[name][1], err_msg=name)
        np.testing.assert_array_equal(got[name][1], want[name][0], err_msg=name)
    # the step counter and the replay start fresh: the new run's rows count from 0
    assert [r["rows"] for r in records] == [80, 80]
    # with no regex the agent's whole state (optimiser, normalisers, counters) comes too
    src_names = [e[0] for e in ckpt._read_raw_meta(source, ckpt.latest_verified(source)[0])
                 [ckpt.LAYOUT_KEY] if e[0].startswith(".agent.opt_state")]
    assert src_names
    a = ckpt.read_leaves(source, ckpt.latest_verified(source)[0], src_names)
    b = ckpt.read_leaves(out, ckpt.latest_verified(out)[0], src_names)
    for name in src_names:
        np.testing.assert_array_equal(b[name], a[name][[1, 0]], err_msg=name)
    assert any(np.any(a[name] != 0) for name in src_names)


def test_a_checkpoint_directory_and_a_regex_load_only_the_selected_groups(source):
    index = ckpt.latest_verified(source)[0]
    cfg = _from(small_config(), source / ckpt.CHECKPOINT_DIR / str(index), r"enc/|dyn/")
    plan = make_plan(cfg, SEEDS)
    trainer = make_trainer(plan)
    try:
        fresh = trainer.init()
        loaded = transfer.load_into(fresh, plan)
        before = {k: np.asarray(v) for k, v in _flat_params(fresh.agent.params).items()}
        after = {k: np.asarray(v) for k, v in _flat_params(loaded.agent.params).items()}
        opt_same = jax.tree.map(lambda a, b: bool(np.array_equal(a, b)),
                                fresh.agent.opt_state, loaded.agent.opt_state)
    finally:
        trainer.close()
    want = _params(source, SEEDS)
    chosen = [n for n in after if n.startswith(("enc/", "dyn/"))]
    others = [n for n in after if n not in chosen]
    assert chosen and others
    for name in chosen:
        np.testing.assert_array_equal(after[name], want[name], err_msg=name)
    for name in others:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert any(not np.array_equal(after[n], want[n]) for n in others)
    assert all(jax.tree.leaves(opt_same))  # the optimiser state starts fresh


def test_bad_sources_are_refused_in_one_line_naming_the_key(source, tmp_path):
    cases = [
        (_from(small_config(), tmp_path / "nowhere"), "run.from_checkpoint: ", "no such"),
        (_from(small_config(), tmp_path), "run.from_checkpoint: ", "not a dreamerjax run"),
        (_from(small_config(), source, "("), "run.from_checkpoint_regex: ", "regular"),
        (_from(small_config(), source, "nothing/"), "run.from_checkpoint_regex: ",
         "selects no parameter"),
        # another env (3 actions, not 2): the first parameter in name order that differs
        (_from(small_config("Acrobot-v1"), source), "run.from_checkpoint: ",
         "another shape: actor/action/out/bias is float32[2] there, float32[3] here"),
    ]
    for cfg, prefix, words in cases:
        with pytest.raises(ConfigError) as e:
            make_plan(cfg, SEEDS)
        msg = str(e.value)
        assert msg.startswith(prefix) and words in msg and "\n" not in msg, msg


def test_the_keys_resolve_at_both_versions(source):
    for reference in ("29eb964", "e3f0224"):
        cfg, _ = resolve(reference=reference, sets=[f"run.from_checkpoint={source}",
                                                    "run.from_checkpoint_regex=enc/"])
        assert cfg.run.from_checkpoint == str(source)
        assert cfg.run.from_checkpoint_regex == "enc/"


@pytest.mark.slow
def test_a_run_from_a_trained_agent_evaluates_as_the_source_did(tmp_path):
    """The source's last evaluation and the new run's first (before its first update)
    are evaluations of the same parameters: their means differ by less than four
    standard errors of the difference, from the episodes' own spread."""
    from dreamerjax.run import driver

    episodes = 16
    src = tmp_path / "src"
    last = driver.train(small_config(steps=2000, eval_episodes=episodes), (0,), str(src),
                        progress=False).records[-1]
    first = driver.train(_from(small_config(steps=80, eval_episodes=episodes), src), (0,),
                         str(tmp_path / "new"), progress=False).records[0]
    assert first["updates"] == 0
    a, b = np.array(last["eval_returns"]), np.array(first["eval_returns"])
    spread = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) <= 4 * max(spread, 1e-6), (a, b)
