"""The `reference` key: HEAD's (e3f0224) key spelling, named configs and defaults; a key of
one version refused in the other with the reason; 29eb964 unchanged by default."""

import pytest

from dreamerjax.config import keys as C
from dreamerjax.config.defaults import HEAD_REF
from dreamerjax.data import schedule


def test_default_is_29eb964_and_unchanged():
    config, prov = C.resolve()
    assert config.agent.reference == "29eb964" and prov.layers == ("defaults",)
    assert config.agent.enc.mults == (1, 2, 3, 4, 4) and config.agent.actor_unimix == 0.01


def test_head_dmc_proprio_takes_heads_values():
    config, prov = C.resolve(["dmc_proprio"], reference=HEAD_REF)
    a, r = config.agent, config.run
    assert a.reference == HEAD_REF and config.size == "1m"
    assert (a.rssm.deter, a.rssm.hidden, a.rssm.classes, a.enc.depth, a.actor.units) == (
        512, 64, 4, 4, 64)
    assert (r.train_ratio, r.steps) == (1024.0, 1_100_000)
    assert config.env.dmc.image is False and config.env.dmc.repeat == 1
    assert a.enc.mults == (2, 3, 4, 4) and not a.enc.outer and a.dec.vec_outscale == 1.0
    assert prov.origin["reference"] == "--reference"


def test_head_spelling_sets_the_same_fields():
    config, _ = C.resolve(sets=["reference=e3f0224", "agent.policy.units=96",
                                "agent.loss_scales.rec=0.5", "agent.imag_loss.lam=0.9",
                                "run.envs=4", r"agent\..*\.layers=2"])
    a = config.agent
    assert a.actor.units == 96 and a.loss_scales.dec_cnn == a.loss_scales.dec_mlp == 0.5
    assert a.return_lambda == 0.9 and config.run.num_envs == 4
    assert a.critic.layers == a.rewhead.layers == a.enc.layers == 2


@pytest.mark.parametrize("kw, message", [
    (dict(sets=["actor.units=3"], reference=HEAD_REF), "at e3f0224 it is 'agent.policy.units'"),
    (dict(sets=["run.train_fill=3"], reference=HEAD_REF), "exists only at 29eb964"),
    (dict(sets=["agent.policy.units=3"]), "a key of e3f0224"),
    (dict(sets=["reference=abc"]), "choose one of 29eb964, e3f0224"),
    (dict(sets=["agent.policy.unimix=0.5"], reference=HEAD_REF), "only 0.01 is implemented"),
    (dict(configs=["size1m"], sets=["reference=e3f0224", "agent.opt.schedule=linear"]),
     "only 'const' is implemented"),
    # a flag that sets 29eb964-only keys: HEAD's CNN has no minres (the image side decides)
    (dict(reference=HEAD_REF, cnn_minres=5), "--cnn-minres: sets enc.simple.minres, "
     "dec.simple.minres, which e3f0224 does not have"),
])
def test_keys_of_the_other_version_are_refused(kw, message):
    with pytest.raises(C.ConfigError, match=message):
        C.resolve(**kw)


def test_heads_replay_gate():
    run = C.resolve()[0].run
    ours = schedule.schedule_from_config(run)
    head = schedule.schedule_from_config(run, HEAD_REF)
    items = lambda n: schedule.items_after(n, run.num_envs, run.batch_length + 1)  # noqa: E731
    assert items(head.gate_rows) >= run.batch_size * run.batch_length > items(head.gate_rows - 1)
    assert items(ours.gate_rows) >= run.batch_size > items(ours.gate_rows - 1)


def test_describe_shows_heads_names():
    config, prov = C.resolve(["dmc_proprio"], reference=HEAD_REF)
    text = C.describe(config, prov)
    assert "agent.policy.units" in text and "\n  actor.units " not in text
    assert "Reference: danijar/dreamerv3 at e3f0224" in text
