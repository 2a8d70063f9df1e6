"""The `reference` key: HEAD's (e3f0224) key spelling, named configs and defaults; a key of
one version refused in the other with the reason; 29eb964 unchanged by default."""

import dataclasses
import re

import pytest

from dreamerjax.config import docs_tables as config_docs
from dreamerjax.config import dotted as D
from dreamerjax.config import keys as C
from dreamerjax.config import resolve as R
from dreamerjax.config import validate as V
from dreamerjax.config import versions
from dreamerjax.config.defaults import HEAD_REF
from dreamerjax.data import schedule
from dreamerjax.tools import args as cli_args


def test_default_is_29eb964_and_unchanged():
    config, prov = R.resolve()
    assert config.agent.reference == "29eb964" and prov.layers == ("defaults",)
    assert config.agent.enc.mults == (1, 2, 3, 4, 4) and config.agent.actor_unimix == 0.01


def test_head_dmc_proprio_takes_heads_values():
    config, prov = R.resolve(["dmc_proprio"], reference=HEAD_REF)
    a, r = config.agent, config.run
    assert a.reference == HEAD_REF and config.size == "1m"
    assert (a.rssm.deter, a.rssm.hidden, a.rssm.classes, a.enc.depth, a.actor.units) == (
        512, 64, 4, 4, 64)
    assert (r.train_ratio, r.steps) == (1024.0, 1_100_000)
    assert config.env.dmc.image is False and config.env.dmc.repeat == 1
    assert a.enc.mults == (2, 3, 4, 4) and not a.enc.outer and a.dec.vec_outscale == 1.0
    assert prov.origin["reference"] == "--reference"


def test_head_spelling_sets_the_same_fields():
    config, _ = R.resolve(sets=["reference=e3f0224", "agent.policy.units=96",
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
    (dict(configs=["size1m"], sets=["reference=e3f0224", "agent.opt.momentum=False"]),
     "only True is implemented"),
    (dict(configs=["size1m"], sets=["reference=e3f0224", "agent.opt.schedule=constant2"]),
     "agent.opt.schedule: 'constant2'; choose one of const, linear, cosine"),
    # a flag that sets 29eb964-only keys: HEAD's CNN has no minres (the image side decides)
    (dict(reference=HEAD_REF, cnn_minres=5), "--cnn-minres: sets enc.simple.minres, "
     "dec.simple.minres, which e3f0224 does not have"),
])
def test_keys_of_the_other_version_are_refused(kw, message):
    with pytest.raises(C.ConfigError, match=message):
        R.resolve(**kw)


def test_heads_replay_gate():
    run = R.resolve()[0].run
    ours = schedule.schedule_from_config(run)
    head = schedule.schedule_from_config(run, HEAD_REF)
    items = lambda n: schedule.items_after(n, run.num_envs, run.batch_length + 1)  # noqa: E731
    assert items(head.gate_rows) >= run.batch_size * run.batch_length > items(head.gate_rows - 1)
    assert items(ours.gate_rows) >= run.batch_size > items(ours.gate_rows - 1)


def test_describe_shows_heads_names():
    config, prov = R.resolve(["dmc_proprio"], reference=HEAD_REF)
    text = config_docs.describe(config, prov)
    assert "agent.policy.units" in text and "\n  actor.units " not in text
    assert "Reference: danijar/dreamerv3 at e3f0224" in text


# --- one version throughout ------------------------------------------------------------


def _with_agent(config, **fields):
    return dataclasses.replace(config, agent=dataclasses.replace(config.agent, **fields))


def test_replacing_only_the_reference_is_refused_before_compiling():
    """A 29eb964 config with agent.reference replaced would run HEAD's code on 29eb964's
    CNN stages and policy unimix: refused by the one check every entry calls, in one line
    naming the key and both versions."""
    from dreamerjax.run.plan import make_plan

    mixed = _with_agent(R.make_config("CartPole-v1"), reference=HEAD_REF)
    with pytest.raises(C.ConfigError) as e:
        V.validate(mixed)
    text = str(e.value)
    assert "\n" not in text and text.startswith("enc.simple.outer: True")
    assert "29eb964" in text and HEAD_REF in text
    with pytest.raises(C.ConfigError, match="enc.simple.outer"):
        make_plan(mixed, (0,))


@pytest.mark.parametrize("key", sorted(versions.E3F0224_FIXED_FIELDS))
def test_each_field_e3f0224_fixes_is_checked(key):
    """Each field: HEAD's defaults hold the fixed value, a HEAD run cannot set it (so only
    a replaced 29eb964 config can differ), and a differing value is refused by name."""
    config = R.make_config("CartPole-v1", reference=HEAD_REF)
    want, _ = versions.E3F0224_FIXED_FIELDS[key]
    flat = D.to_dotted(config)
    assert flat[key] == want
    other = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v / 2 + 0.005}
    value = other[type(want)](want)
    with pytest.raises(C.ConfigError):  # not a key of HEAD's spelling
        R.resolve(sets=[f"{key}={value}"], reference=HEAD_REF)
    flat[key] = value
    with pytest.raises(C.ConfigError, match=rf"^{re.escape(key)}: .* 29eb964 only; e3f0224"):
        V.validate(D.from_dotted(flat))


def test_configs_made_at_e3f0224_pass():
    V.validate(R.make_config("CartPole-v1", reference=HEAD_REF))
    V.validate(R.make_config("CartPole-v1", size="12m", reference="e3f0224", steps=4000))
    V.validate(R.resolve(["dmc_proprio"], reference=HEAD_REF)[0])
    V.validate(R.resolve(sets=["reference=e3f0224", "agent.dec.simple.outscale=0.5"])[0])


def test_the_command_line_at_e3f0224_passes():
    from dreamerjax.tools import cli

    argv = ["train", "--env", "CartPole-v1", "--reference", HEAD_REF, "--tiny",
            "--out", "/nonexistent/run"]
    config = cli_args.config_from_args(cli.parse(argv).validate())
    assert config.agent.reference == HEAD_REF and not config.agent.enc.outer
    V.validate(config)


def test_keys_both_versions_have_resolve_at_e3f0224():
    # HEAD's own logger keys and its dmc_vision (the image only: our enc/dec.spaces)
    config, _ = R.resolve(["dmc_vision"], ["logger.outputs=[jsonl]", "logger.filter=score"],
                          reference=HEAD_REF)
    assert config.agent.reference == HEAD_REF
    assert config.logger.outputs == ("jsonl",) and config.logger.filter == "score"
    assert D.to_dotted(config)["enc.spaces"] == "image"
    assert D.to_dotted(config)["dec.spaces"] == "image"
