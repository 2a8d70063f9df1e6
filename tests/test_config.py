"""Dotted keys, named configs, overrides and files (dreamerjax.config.keys) against the
reference's configs.yaml @29eb964, read by hand into the tables below."""

import dataclasses
import json
import typing

import pytest

from dreamerjax.config import docs_tables as config_docs
from dreamerjax.config import dotted as D
from dreamerjax.config import keys as C
from dreamerjax.config import resolve as R
from dreamerjax.config.defaults import (
    DEFAULT_SIZE,
    SIZES,
    Config,
    RunConfig,
    agent_config,
    from_dict,
    replay_rows_per_env,
    tiny_agent_config,
)
from dreamerjax.tools import args as cli_args
from dreamerjax.tools import cli

# The reference's resolved values for `--configs dmc_proprio size12m --set
# run.train_ratio=256`, every key that applies here, read from configs.yaml @29eb964:
# defaults (lines 1-146), then dmc_proprio (232-237, which merges size12m 148-151), then
# size12m again, then the flag.
DMC_PROPRIO_12M_256 = {
    "task": "dmc_walker_walk",
    "run.steps": 300000, "run.num_envs": 16, "run.eval_eps": 1, "run.train_ratio": 256.0,
    "run.train_fill": 0, "replay.size": 5000000, "replay.chunksize": 1024,
    "wrapper.length": 0,
    # configs.yaml:14-17 @29eb964
    "replay.fracs.uniform": 1.0, "replay.fracs.priority": 0.0, "replay.fracs.recency": 0.0,
    "replay.prio.exponent": 0.8, "replay.prio.maxfrac": 0.5,
    "replay.prio.initial": float("inf"), "replay.prio.zero_on_sample": True,
    "replay.recexp": 1.0, "replay.priosignal": "model",
    "run.driver_parallel": True,
    "env.atari.size": (64, 64), "env.atari.repeat": 4, "env.atari.sticky": True,
    "env.atari.gray": True, "env.atari.actions": "all", "env.atari.lives": "unused",
    "env.atari.noops": 0, "env.atari.autostart": False, "env.atari.pooling": 2,
    "env.atari.aggregate": "max", "env.atari.resize": "pillow",
    "env.atari100k.size": (64, 64), "env.atari100k.repeat": 4,
    "env.atari100k.sticky": False, "env.atari100k.gray": False,
    "env.atari100k.actions": "all", "env.atari100k.lives": "unused",
    "env.atari100k.noops": 0, "env.atari100k.autostart": False,
    "env.atari100k.resize": "pillow", "env.atari100k.length": 100000,
    "env.crafter.size": (64, 64),
    "env.dmc.size": (64, 64), "env.dmc.repeat": 2, "env.dmc.image": False,
    "env.procgen.size": (64, 64),
    "env.dmc.camera": -1,
    "env.loconav.size": (64, 64), "env.loconav.repeat": 2, "env.loconav.camera": -1,  # :86
    "batch_size": 16, "batch_length": 65, "replay_context": 1,
    "loss_scales.dec_cnn": 1.0, "loss_scales.dec_mlp": 1.0, "loss_scales.reward": 1.0,
    "loss_scales.cont": 1.0, "loss_scales.dyn": 1.0, "loss_scales.rep": 0.1,
    "loss_scales.actor": 1.0, "loss_scales.critic": 1.0, "loss_scales.replay_critic": 0.3,
    "opt.lr": 4e-5, "opt.eps": 1e-20, "opt.warmup": 1000, "opt.agc": 0.3,
    "opt.beta1": 0.9, "opt.beta2": 0.999, "opt.pmin": 1e-3, "opt.wd": 0.0,
    "opt.globclip": 0.0, "opt.anneal": 0, "opt.schedule": "constant",
    "separate_lrs": False, "lrs.dec": 1e-4, "lrs.enc": 1e-4, "lrs.dyn": 1e-4,
    "lrs.rew": 1e-4, "lrs.con": 1e-4, "lrs.actor": 3e-5, "lrs.critic": 3e-5,
    "reset_context": 0.0, "run.expl_until": 0, "run.from_checkpoint": "",
    "valnorm.impl": "off", "valnorm.rate": 0.01, "valnorm.limit": 1e-8,
    "advnorm.impl": "off", "advnorm.rate": 0.01, "advnorm.limit": 1e-8,
    "replay_critic_loss": True,
    "dyn.rssm.deter": 2048, "dyn.rssm.hidden": 256, "dyn.rssm.stoch": 32,
    "dyn.rssm.classes": 16, "dyn.rssm.unimix": 0.01, "dyn.rssm.outscale": 1.0,
    "dyn.rssm.imglayers": 2, "dyn.rssm.obslayers": 1, "dyn.rssm.dynlayers": 1,
    "dyn.rssm.absolute": False, "dyn.rssm.blocks": 8,
    "enc.spaces": ".*",
    "enc.simple.depth": 16, "enc.simple.mults": (1, 2, 3, 4, 4), "enc.simple.layers": 3,
    "enc.simple.units": 256, "enc.simple.symlog": True, "enc.simple.outer": True,
    "enc.simple.kernel": 5, "enc.simple.minres": 4,
    "dec.spaces": ".*",
    "dec.simple.depth": 16, "dec.simple.mults": (1, 2, 3, 4, 4), "dec.simple.layers": 3,
    "dec.simple.units": 256, "dec.simple.outscale": 1.0, "dec.simple.outer": True,
    "dec.simple.kernel": 5, "dec.simple.minres": 4, "dec.simple.block_space": 8,
    "dec.simple.hidden_stoch": True,
    "rewhead.layers": 1, "rewhead.units": 256, "rewhead.outscale": 0.0,
    "rewhead.bins": 255,
    "conhead.layers": 1, "conhead.units": 256, "conhead.outscale": 1.0,
    "contdisc": True, "rssm_loss.free": 1.0,
    "actor.layers": 3, "actor.units": 256, "actor.outscale": 0.01, "actor.minstd": 0.1,
    "actor.maxstd": 1.0, "actor.unimix": 0.01,
    "critic.layers": 3, "critic.units": 256, "critic.outscale": 0.0, "critic.bins": 255,
    "imag_length": 15, "horizon": 333, "return_lambda": 0.95, "return_lambda_replay": 0.95,
    "slow_critic_update": 1, "slow_critic_fraction": 0.02,
    "retnorm.rate": 0.01, "retnorm.limit": 1.0, "retnorm.perclo": 5.0,
    "retnorm.perchi": 95.0,
    "actent": 3e-4, "slowreg": 1.0,
    # The logger's keys are the reference's HEAD's (configs.yaml:23-24 at e3f0224).
    "logger.outputs": ("jsonl", "scope"),
    "logger.filter": "score|length|fps|ratio|train/loss/|train/rand/",
    # Keys with one implemented value (a sample; every FIXED key is compared below).
    "dyn.rssm.act": "silu", "dyn.rssm.cell": "blockgru", "retnorm.impl": "perc",
    "replay.online": True, "opt.scaler": "rms", "jax.compute_dtype": "bfloat16",
    "jax.train_devices": (0,),  # configs.yaml:31 @29eb964
}

# Where our resolved value differs on purpose from the reference's (docs/config.md).
KNOWN_DIFFERENCES = {
    "run.eval_eps": 10,  # the protocol evaluates 10 episodes per log point
    "run.driver_parallel": False,  # host envs step in this process unless asked
    "jax.compute_dtype": "float32",  # bfloat16 is implemented; our default stays float32
    # scope (the reference's viewer) is not an output here; the filter picks our line's.
    "logger.outputs": ("jsonl", "tensorboard"),
    "logger.filter": "eval_return|train_return|wm_loss|actor_entropy|updates/s",
}

# configs.yaml:148-176 (and our 1m): deter, hidden, classes, CNN depth, MLP units.
REFERENCE_SIZES = {
    "12m": (2048, 256, 16, 16, 256),
    "25m": (3072, 384, 24, 24, 384),
    "50m": (4096, 512, 32, 32, 512),
    "100m": (6144, 768, 48, 48, 768),
    "200m": (8192, 1024, 64, 64, 1024),
    "400m": (12288, 1536, 96, 96, 1536),
}

UNITS_KEYS = ("enc.simple.units", "dec.simple.units", "rewhead.units", "conhead.units",
              "actor.units", "critic.units")


def _resolved_view(config: Config) -> dict:
    """The dotted form plus the one implemented value of every FIXED key."""
    return D.to_dotted(config) | {k: v for k, (v, _) in C.FIXED.items()}


def test_dmc_proprio_size12m_matches_the_reference_table():
    config, _ = R.resolve(["dmc_proprio", "size12m"], ["run.train_ratio=256"])
    ours = _resolved_view(config)
    table = dict(DMC_PROPRIO_12M_256)
    # Every reference key that applies here is in the table (no key skipped).
    assert set(C.REFERENCE_KEYS) <= set(table)
    differ = {}
    for key, want in table.items():
        got = ours[key]
        if got != want or type(got) is not type(want):
            differ[key] = got
    assert differ == KNOWN_DIFFERENCES
    assert config.size == "12m"
    assert config.run.batch_length == 64  # trained rows: 65 minus the context row


def test_fixed_keys_hold_the_references_defaults():
    # The one value a FIXED key accepts is the reference's default (configs.yaml 1-146).
    ref_defaults = {"dyn.rssm.act": "silu", "dec.simple.vecdist": "symlog_mse",
                    "replay.online": True, "opt.details": False,
                    "imag_repeat": 1, "jax.param_dtype": "float32"}
    for key, want in ref_defaults.items():
        assert C.FIXED[key][0] == want, key


@pytest.mark.parametrize("name", list(REFERENCE_SIZES))
def test_size_presets_have_the_references_widths(name):
    deter, hidden, classes, depth, units = REFERENCE_SIZES[name]
    config, _ = R.resolve([f"size{name}"])
    flat = D.to_dotted(config)
    assert (flat["dyn.rssm.deter"], flat["dyn.rssm.hidden"], flat["dyn.rssm.classes"]) == (
        deter, hidden, classes)
    assert flat["enc.simple.depth"] == flat["dec.simple.depth"] == depth
    assert all(flat[k] == units for k in UNITS_KEYS)
    assert flat["dyn.rssm.stoch"] == 32 and flat["dyn.rssm.blocks"] == 8
    assert config.agent == agent_config(name) and config.size == name
    # --size is the same named config.
    assert R.resolve(size=name)[0] == config


def test_size1m_and_tiny_are_ours_and_equal_the_presets():
    assert R.resolve(["size1m"])[0].agent == agent_config("1m")
    tiny, _ = R.resolve(tiny=True)
    assert tiny.agent == tiny_agent_config() and tiny.size == "tiny"
    assert set(SIZES) == {"1m", *REFERENCE_SIZES}


def test_one_default_size():

    assert Config().size == DEFAULT_SIZE == cli_args.DEFAULT_SIZE == "1m"
    assert Config().agent == agent_config(DEFAULT_SIZE)
    assert R.resolve()[0] == Config()


def test_suite_presets():
    atari, _ = R.resolve(["atari"])  # configs.yaml:192-199
    assert atari.env.atari.size == (96, 96) and atari.run.env == "atari_pong"
    assert atari.agent.enc.minres == atari.agent.dec.minres == 6
    assert atari.run.steps == 51_000_000 and atari.size == "1m"
    a100k, _ = R.resolve(["atari100k"])  # :211-218
    assert (a100k.run.steps, a100k.run.num_envs, a100k.run.train_ratio) == (110_000, 1, 256.0)
    crafter, _ = R.resolve(["crafter"])  # :220-230
    assert (crafter.run.env, crafter.run.num_envs, crafter.run.train_ratio,
            crafter.run.steps) == ("crafter_reward", 1, 512.0, 1_100_000)
    vision, _ = R.resolve(["dmc_vision"])  # :239-245
    assert vision.size == "12m" and vision.run.steps == 600_000 and vision.env.dmc.image
    debug, _ = R.resolve(["debug"])  # :275-288
    flat = D.to_dotted(debug)
    assert (flat["batch_size"], flat["batch_length"], flat["replay.size"],
            flat["run.num_envs"], flat["run.train_ratio"], flat["wrapper.length"]) == (
        4, 12, 10_000, 4, 8.0, 100)
    assert flat["rewhead.bins"] == flat["critic.bins"] == 9
    r = debug.agent.rssm
    assert (r.deter, r.hidden, r.stoch, r.classes, r.blocks) == (12, 8, 4, 4, 4)
    for key in ("enc.simple.layers", "dec.simple.layers", "rewhead.layers",
                "conhead.layers", "actor.layers", "critic.layers"):
        assert flat[key] == 2, key
    assert all(flat[k] == 8 for k in UNITS_KEYS)
    assert flat["enc.simple.depth"] == flat["dec.simple.depth"] == 2
    assert flat["dyn.rssm.imglayers"] == 2  # `.*\.layers` does not match imglayers


def test_configs_compose_left_to_right():
    a, _ = R.resolve(["size50m", "size12m"])
    b, _ = R.resolve(["size12m", "size50m"])
    assert a.agent.rssm.deter == 2048 and b.agent.rssm.deter == 4096
    # A size preset after a suite preset replaces only the widths.
    c, _ = R.resolve(["dmc_proprio", "size50m"])
    assert c.size == "50m" and c.run.steps == 300_000 and not c.env.dmc.image


def test_set_parses_yaml_values_and_regex_keys():
    config, prov = R.resolve(sets=[r".*\.units=100", "env.atari.size=[80, 80]",
                                   "run.steps=3e5", "enc.simple.mults=1,2",
                                   "contdisc=False", "opt.lr=1e-4"])
    flat = D.to_dotted(config)
    assert all(flat[k] == 100 for k in UNITS_KEYS)
    assert config.env.atari.size == (80, 80) and config.agent.enc.mults == (1, 2)
    assert config.run.steps == 300_000 and isinstance(config.run.steps, int)
    assert config.agent.contdisc is False and config.agent.opt.lr == 1e-4
    assert config.size == "custom"
    assert prov.origin["actor.units"] == r"--set .*\.units=100"
    assert prov.origin["opt.eps"] == "defaults"


def test_yaml_reads_as_the_references_yaml_1_2(tmp_path):
    """The reference's ruamel reads YAML 1.2: only true/false are booleans, so its
    `advnorm: {impl: off}` is the string 'off' (the one value implemented), not False."""
    path = tmp_path / "c.yaml"
    path.write_text("advnorm: {impl: off}\ncontdisc: false\nrun: {steps: 1.1e5}\n")
    config, prov = R.resolve(config_file=path)
    assert prov.origin["contdisc"] == f"--config {path}" and config.agent.contdisc is False
    assert config.run.steps == 110_000
    with pytest.raises(C.ConfigError, match="advnorm.impl"):
        R.resolve(sets=["advnorm.impl=on"])
    with pytest.raises(C.ConfigError, match="contdisc: expects bool, got 'yes'"):
        R.resolve(sets=["contdisc=yes"])


def test_regex_matching_as_the_reference():
    # --set matches the whole key (flags.py:78-83); files and named configs match from
    # the start of a key (config.py:113-117), so `dyn\.rssm\.(deter|hid)` reaches hidden.
    pattern = r"dyn\.rssm\.(deter|hid)"
    by_set, _ = R.resolve(sets=[f"{pattern}=1024"])
    assert (by_set.agent.rssm.deter, by_set.agent.rssm.hidden) == (1024, 64)
    with pytest.raises(C.ConfigError, match="matches no key"):
        R.resolve(sets=[r"dyn\.rssm\.hid=3"])


def test_regex_prefix_match_in_files(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("dyn\\.rssm\\.(deter|hid): 1024\n")
    config, _ = R.resolve(config_file=path)
    assert (config.agent.rssm.deter, config.agent.rssm.hidden) == (1024, 1024)


def test_precedence(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"run": {"steps": 40000, "train_ratio": 64},
                                "dyn.rssm": {"deter": 1024}, "batch_size": 8}))
    config, prov = R.resolve(["size12m"], ["run.train_ratio=128"], path, steps=60000,
                             eval_every=None)
    assert config.run.batch_size == 8  # the file alone sets it
    assert config.agent.rssm.deter == 2048  # --configs after the file
    assert config.run.train_ratio == 128.0  # --set after --configs and the file
    assert config.run.steps == 60000  # an explicit flag last
    assert prov.layers == ("defaults", f"--config {path}", "--configs size12m",
                           "--set run.train_ratio=128", "--steps")
    assert prov.origin["batch_size"] == f"--config {path}"
    # --size comes after --configs, so --set still overrides its widths.
    sized, _ = R.resolve(["dmc_proprio"], [r".*\.units=32"], size="50m")
    assert sized.agent.actor.units == 32 and sized.agent.rssm.deter == 4096


def test_cli_flags_map_to_keys():
    config, _ = R.resolve(env="Pendulum-v1", steps=4000, eval_every=400, eval_episodes=3,
                          num_envs=8, train_ratio=32.0, checkpoint_every=0,
                          twohot_mean="pairsum", cnn_mults=(1, 2), cnn_minres=5,
                          data_devices=2)
    run, agent = config.run, config.agent
    assert run.train_devices == (0, 1)  # --data-devices N is jax.train_devices=[0..N-1]
    assert (run.env, run.steps, run.eval_every, run.eval_episodes, run.num_envs,
            run.train_ratio, run.checkpoint_every) == ("Pendulum-v1", 4000, 400, 3, 8, 32.0, 0)
    assert agent.twohot_mean == "pairsum"
    assert agent.enc.mults == agent.dec.mults == (1, 2)
    assert agent.enc.minres == agent.dec.minres == 5
    assert set(C.FLAG_KEYS) <= {f.name for f in dataclasses.fields(RunConfig)} | {
        "eval_every", "twohot_mean", "cnn_mults", "cnn_minres", "reference", "data_devices"}


def test_dotted_json_and_run_config_round_trip(tmp_path):
    config, _ = R.resolve(["debug"], ["opt.lr=3e-4", "twohot_mean=pairsum"])
    dotted = tmp_path / "dotted.json"
    dotted.write_text(D.dotted_json(config))
    assert R.resolve(config_file=dotted)[0] == config
    yml = tmp_path / "dotted.yaml"
    D.dump(config, yml)
    assert R.resolve(config_file=yml)[0] == config
    # A run's own config.json (the field form the driver writes, with its seeds).
    run_file = tmp_path / "config.json"
    run_file.write_text(json.dumps(config.to_dict() | {"seeds": [0, 1]}))
    assert R.resolve(config_file=run_file)[0] == config


def test_old_run_config_without_new_fields_loads(tmp_path):
    old = Config().to_dict()
    del old["env"], old["run"]["replay_size"]
    scales = old["agent"]["loss_scales"]
    scales["dec"] = 2.0
    del scales["dec_cnn"], scales["dec_mlp"]
    config = from_dict(old)
    assert config.agent.loss_scales.dec_cnn == config.agent.loss_scales.dec_mlp == 2.0
    assert config.env == Config().env and config.run.replay_size == 5_000_000


def test_files_of_earlier_runs_with_a_retired_key_load(tmp_path):
    """run.protocol wrote the protocol's record fields, which `dreamerjax compare` now
    derives: a run's config.json, a dotted config file and an exported policy's config that
    hold it still load; a --set of it is refused with the reason."""
    old = Config().to_dict()
    old["run"]["protocol"] = True
    assert from_dict(old) == Config()
    dotted = {k: list(v) if isinstance(v, tuple) else v
              for k, v in D.to_dotted(Config()).items()}
    assert R.from_mapping({**dotted, "run.protocol": True}) == Config()
    path = tmp_path / "old.yaml"
    path.write_text("run.protocol: true\nrun.steps: 4000\n")
    assert D.load_file(path) == {"run.steps": 4000}
    assert R.resolve(config_file=path)[0].run.steps == 4000
    with pytest.raises(C.ConfigError, match=r"run.protocol.*`dreamerjax compare` reads any"):
        R.resolve(sets=["run.protocol=true"])


def test_every_field_has_one_key():
    def leaves(cls, prefix=""):
        for f in dataclasses.fields(cls):
            typ = typing.get_type_hints(cls)[f.name]
            if dataclasses.is_dataclass(typ):
                yield from leaves(typ, f"{prefix}{f.name}.")
            else:
                yield f"{prefix}{f.name}"

    paths = list(C.KEYS.values())
    assert len(paths) == len(set(paths))  # one key per field
    assert set(leaves(Config)) == set(paths) | C.UNKEYED_FIELDS
    assert not set(C.KEYS) & (set(C.FIXED) | set(C.REFUSED))
    assert not set(C.FIXED) & set(C.REFUSED)


def _error(*args, **kwargs) -> str:
    with pytest.raises(C.ConfigError) as e:
        R.resolve(*args, **kwargs)
    message = str(e.value)
    assert "\n" not in message
    return message


def test_bad_input_is_refused_naming_the_key(tmp_path):
    assert "batch_size: expects int, got 'abc'" in _error(sets=["batch_size=abc"])
    assert "run.steps: expects int, got 1.5" in _error(sets=["run.steps=1.5"])
    assert "contdisc: expects bool" in _error(sets=["contdisc=1"])
    assert "env.dmc.size: expects list of 2 int" in _error(sets=["env.dmc.size=[1, 2, 3]"])
    assert "batch_length: 2001 rows are longer than the replay (1250 rows per env" in _error(
        sets=["batch_length=2001"])
    assert "batch_length" in _error(sets=["replay.size=320"])  # 20 rows per env < 65
    assert "dyn.rssm.deter: 1020 is not divisible by dyn.rssm.blocks 8" in _error(
        sets=["dyn.rssm.deter=1020"])
    assert "--configs size13m: unknown config name" in _error(["size13m"])
    assert "closest: size1m, size12m" in _error(["size13m"])
    assert "unknown key 'dyn.rssm.detr'; closest: dyn.rssm.deter" in _error(
        sets=["dyn.rssm.detr=3"])
    assert "twohot_mean" in _error(sets=["twohot_mean=fast"])
    assert "run.seed_loop: 'scan'; choose one of auto, vmap, map" in _error(
        sets=["run.seed_loop=scan"])
    assert "replay_context: only 1" in _error(sets=["replay_context=0"])
    assert "write KEY=VALUE" in _error(sets=["batch_size"])
    assert "no such file" in _error(config_file=tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert "not a mapping" in _error(config_file=tmp_path / "list.yaml")


def test_keys_without_meaning_here_are_refused_with_the_reason():
    assert "does not apply here: seconds of wall clock" in _error(sets=["run.eval_every=10"])
    assert "run directory is --out" in _error(sets=["logdir=runs/x"])
    assert "--seeds" in _error(sets=["seed=3"])
    assert "dmlab suite needs DeepMind Lab" in _error(sets=["env.dmlab.repeat=2"])
    assert "the fractions must be >= 0 and sum to 1" in _error(
        sets=["replay.fracs.priority=0.5"])
    assert "jax.param_dtype='bfloat16' is not supported" in _error(
        sets=["jax.param_dtype=bfloat16"])
    assert "only 'silu' is implemented" in _error(sets=[r".*\.act=gelu"])
    # The one implemented value is accepted (a reference config that states it loads).
    R.resolve(sets=["dyn.rssm.act=silu", "replay.fracs.uniform=1", "opt.wd=0"])


def test_replay_rows_per_env():
    run = RunConfig(steps=20000, num_envs=16)
    assert replay_rows_per_env(run) == 1250  # the run never wraps a 5e6 replay
    assert replay_rows_per_env(dataclasses.replace(run, replay_size=8000)) == 500
    assert replay_rows_per_env(dataclasses.replace(run, replay_capacity=77)) == 77


def test_describe_prints_precedence_and_origins():
    config, prov = R.resolve(["size12m"], ["opt.lr=1e-4"])
    text = config_docs.describe(config, prov)
    assert text.startswith("Precedence: defaults < --config FILE < --configs")
    assert "Layers applied: defaults < --configs size12m < --set opt.lr=1e-4" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("opt.lr "))
    assert "0.0001" in line and "[--set opt.lr=1e-4]" in line


def test_docs_hold_the_key_tables():
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "config.md").read_text()
    assert page.endswith(config_docs.markdown_tables())


def _reference_count(config: Config, obs: int, act: int, discrete: bool) -> dict:
    """Optimised variables of the reference's networks for a vector observation, counted by
    hand from dreamerv3/nets.py @29eb964: Linear = kernel + bias (+ rms scale when normed,
    :599-640), BlockLinear kernel [g, in/g, out/g] + bias (:643-700), the two-hot outputs
    padded to an even count (:433-441), a normal actor with its std layer (:446-448)."""
    a, r = config.agent, config.agent.rssm
    D, H, SC, g = r.deter, r.hidden, r.stoch * r.classes, r.blocks
    F = D + SC

    def lin(i, o, norm=True):
        return i * o + o + (o if norm else 0)

    def mlp(i, units, layers):
        return sum(lin(i if k == 0 else units, units) for k in range(layers))

    def twohot(bins):
        return bins + bins % 2

    enc = mlp(obs, a.enc.units, a.enc.layers)
    dyn = (lin(D, H) + lin(SC, H) + lin(act, H)
           + g * (D // g + 3 * H) * (D // g) + 2 * D  # dyn0, dynlayers 1
           + g * (D // g) * (3 * D // g) + 3 * D  # dyncore
           + lin(D + a.enc.units, H) + lin(H, SC, norm=False)  # obs0, obslogit
           + lin(D, H) + lin(H, H) + lin(H, SC, norm=False))  # img0, img1, imglogit
    dec = mlp(F, a.dec.units, a.dec.layers) + lin(a.dec.units, obs, norm=False)
    rew = mlp(F, a.rewhead.units, 1) + lin(a.rewhead.units, twohot(a.rewhead.bins), False)
    con = mlp(F, a.conhead.units, 1) + lin(a.conhead.units, 1, norm=False)
    actor = mlp(F, a.actor.units, 3) + lin(a.actor.units, act, norm=False) * (
        1 if discrete else 2)
    critic = mlp(F, a.critic.units, 3) + lin(a.critic.units, twohot(a.critic.bins), False)
    counts = dict(enc=enc, dyn=dyn, dec=dec, rew=rew, con=con, actor=actor, critic=critic)
    return counts | {"total": sum(counts.values())}


@pytest.mark.parametrize("configs,flags,space,total", [
    (["size12m"], dict(env="CartPole-v1"), (4, 2, True), 9_724_679),
    ([], dict(env="Pendulum-v1", size="1m"), (3, 1, False), 637_318),
    ([], dict(env="CartPole-v1"), (4, 2, True), 637_511),  # the reference printed this
])
def test_parameter_counts_match_the_references_formula(configs, flags, space, total):
    import jax

    from dreamerjax.algo import agent as agent_lib
    from dreamerjax.run import setup as setup_lib

    config, _ = R.resolve(configs, **flags)
    spaces = setup_lib.make_setup(config).spaces
    params = jax.eval_shape(lambda k: agent_lib.init_params(k, config.agent, spaces),
                            jax.random.PRNGKey(0))
    ours = agent_lib.param_counts(params)
    assert ours == _reference_count(config, *space)
    assert ours["total"] == total


def test_reference_style_key_flags_become_sets():
    own = ["env", "steps", "configs", "set", "out"]
    argv = ["train", "--configs", "crafter", "size50m", "--run.train_ratio", "32",
            "--batch_size=8", r"--.*\.units", "64", "--env.atari.size", "96", "96",
            "--steps", "100", "--out", "x"]
    assert R.rewrite_key_flags(argv, own) == [
        "train", "--configs", "crafter", "size50m", "--set", "run.train_ratio=32",
        "--set", "batch_size=8", "--set", r".*\.units=64", "--set", "env.atari.size=96,96",
        "--steps", "100", "--out", "x"]
    config, _ = R.resolve(["crafter", "size50m"], ["run.train_ratio=32", "env.atari.size=96,96"])
    assert config.run.train_ratio == 32.0 and config.env.atari.size == (96, 96)
    with pytest.raises(C.ConfigError, match="needs a value"):
        R.rewrite_key_flags(["--run.steps", "--out", "x"], own)


def test_a_checkpoint_from_before_the_dec_scales_resumes():
    from dreamerjax.run import resume

    config = Config()
    old = config.to_dict()
    scales = old["agent"]["loss_scales"]
    scales["dec"] = scales.pop("dec_cnn")
    del scales["dec_mlp"], old["env"], old["run"]["replay_size"]
    resume.check_resumable({"config": old, "seeds": [0]}, config, (0,))
    scales["dec"] = 2.0
    with pytest.raises(ValueError, match="loss_scales.dec_cnn"):
        resume.check_resumable({"config": old, "seeds": [0]}, config, (0,))


def test_config_checks_do_not_import_jax():
    import subprocess
    import sys

    from dreamerjax.algo import numerics
    from dreamerjax.config import defaults

    assert defaults.TWOHOT_MEANS == tuple(numerics.TWOHOT_MEANS)
    code = ("import sys; from dreamerjax.config import resolve; "
            "resolve.resolve(['dmc_proprio'], ['opt.lr=1e-4']); "
            "assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dmc_vision_encodes_and_decodes_only_the_image():
    """configs.yaml:244-245 @29eb964: dmc_vision sets enc.spaces and dec.spaces to 'image'
    (the env also emits the proprioceptive keys)."""
    from dreamerjax.config import resolve as R

    config, _ = R.resolve(["dmc_vision"])
    assert (config.agent.enc_spaces, config.agent.dec_spaces) == ("image", "image")
    config, _ = R.resolve(["dmc_proprio"])
    assert (config.agent.enc_spaces, config.agent.dec_spaces) == (".*", ".*")


@pytest.mark.parametrize("sets, match", [
    (["jax.train_devices=[1,2]"], r"^jax.train_devices: expects the devices 0 \.\.\. N-1"),
    (["jax.train_devices=[0,1,2]"], r"^run.num_envs: 16 cannot be split over the 3 data devices"),
    (["jax.train_devices=[0,1]", "batch_size=3"], r"^batch_size: 3 cannot be split over the 2 "),
    (["jax.train_devices=[0,1]", "jax.train_mesh=1,1,2"], r"^jax.train_mesh: the tensor axis"),
    (["jax.train_devices=[0,1]", "jax.train_mesh=3,-1,1"], r"^jax.train_mesh: '3,-1,1' does "),
    (["jax.train_mesh=a,b"], r"^jax.train_mesh: expects three integers"),
    # 'f' is HEAD's FSDP axis (algo/fsdp.py): 29eb964 has none.
    (["jax.train_devices=[0,1]", "jax.train_mesh=1,2,1"], r"^jax.train_mesh: the FSDP axis"),
])
def test_train_devices_are_checked_by_key(sets, match):
    with pytest.raises(C.ConfigError, match=match):
        R.resolve(sets=sets)


def test_train_devices_and_heads_mesh_resolve():
    config, _ = R.resolve(sets=["jax.train_devices=[0,1,2,3]", "jax.train_mesh=2,-1,1"],
                          reference="e3f0224")
    assert config.run.train_devices == (0, 1, 2, 3)
    from dreamerjax.config.defaults import data_devices, fsdp_devices, mesh_shape
    assert data_devices(config.run) == 4 and mesh_shape(config.run) == (2, 2, 1)
    assert fsdp_devices(config.run) == 2
    plain, _ = R.resolve(sets=["jax.train_devices=[0,1,2,3]", "jax.train_mesh=-1,1,1"])
    assert mesh_shape(plain.run) == (4, 1, 1) and fsdp_devices(plain.run) == 1
    head, _ = R.resolve(sets=["jax.train_devices=[0,1]"], reference="e3f0224")
    assert head.run.train_devices == (0, 1)


def _suggestions_validate(config: Config) -> int:
    """How many changes config's refusal suggests (0 when it validates); each, made,
    validates, else AssertionError naming it."""
    from dreamerjax.config.validate import validate

    try:
        validate(config)
        return 0
    except C.ConfigError as e:
        fixes = e.fix
    for change in fixes:
        flat = D.to_dotted(config)
        flat.update(C.fix_pairs(change))
        try:
            validate(D.from_dotted(flat))
        except C.ConfigError as e:
            raise AssertionError(f"{config.run}: the suggestion {change} is refused: "
                                 f"{e}") from e
    return len(fixes)


def test_every_suggested_fix_passes_validation():
    """A refusal's suggestion is never itself refused: over a grid of run lengths, log
    intervals, env counts, sequence lengths and replay sizes, and of data devices that
    do not split the envs or the batch of a run that is otherwise fine, every change a
    ConfigError suggests, made, validates (the log points, the replay one sequence needs
    and the data devices' split, all at once)."""
    import itertools

    from dreamerjax.config.validate import validate

    def config(devices=1, batch=16, **run):
        return dataclasses.replace(base, run=dataclasses.replace(
            base.run, train_devices=tuple(range(devices)), batch_size=batch, **run))

    base = Config()
    suggested = 0
    for steps, every, envs, length, capacity, size in itertools.product(
            (400, 1000, 1200, 20000), (250, 300, 500, 2000), (3, 16), (15, 64), (0, 80),
            (5_000_000, 600)):
        suggested += _suggestions_validate(config(
            steps=steps, eval_every=every, num_envs=envs, batch_length=length,
            replay_capacity=capacity, replay_size=size))
    assert suggested > 100
    for steps, envs, devices, batch in itertools.product(
            (400, 1200, 2000, 20000), (1, 3, 5, 10, 16), (2, 3, 4, 8), (6, 16)):
        run = dict(steps=steps, eval_every=400 if steps == 1200 else steps, num_envs=envs,
                   batch_length=15)
        try:  # a run that one device takes: only the data devices' split is refused
            validate(config(batch=batch, **run))
        except C.ConfigError:
            continue
        suggested += _suggestions_validate(config(devices, batch, **run))
    assert suggested > 150


@pytest.mark.parametrize("argv, fix", [
    (["--steps", "1200", "--eval-every", "300"], "; pass --eval-every 240"),
    (["--steps", "1200", "--eval-every", "500"], "; pass --eval-every 400"),
    (["--steps", "1200", "--eval-every", "480"], "; pass --eval-every 400 or --steps 1440"),
    (["--steps", "1000", "--eval-every", "250"], "; pass --eval-every 256 --steps 1280"),
    (["--steps", "400", "--eval-every", "300"], "; pass --eval-every 304 --steps 1216"),
    (["--num-envs", "10", "--data-devices", "4"], "; pass --num-envs 8"),
])
def test_one_suggestion_that_satisfies_every_rule(argv, fix, tmp_path, capsys):
    """The fix a refusal names is one the run then takes (a log interval of whole ticks
    that divides the run, not one that the next check refuses)."""
    with pytest.raises(cli_args.ArgumentError) as e:
        cli_args.config_from_args(cli.parse(["train", *argv, "--out", str(tmp_path)]))
    assert str(e.value).endswith(fix), e.value
    for change in fix.removeprefix("; pass ").split(" or "):
        fixed = [*argv, *change.split()]
        cli_args.config_from_args(cli.parse(["train", *fixed, "--out", str(tmp_path)]))
