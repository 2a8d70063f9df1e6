"""The reference's training options (opt.wd, opt.globclip, opt.schedule / opt.anneal,
separate_lrs, valnorm, advnorm, reset_context, run.expl_until): the reference's own
arrays (tests/data/reference_options) pass `parity --strict`; the options reach the
update; their keys are accepted at each version and bad values refused before compiling."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo import normalize, optim
from dreamerjax.algo.spaces import Spaces
from dreamerjax.config import keys as C
from dreamerjax.config import resolve as R
from dreamerjax.config.defaults import (
    HEAD_REF,
    NormConfig,
    OptConfig,
    Reference,
    head_defaults,
    tiny_agent_config,
)
from dreamerjax.config.validate import validate
from dreamerjax.tools.parity.fixtures import _load, run_parity

REF = Path(__file__).parent / "data" / "reference_options"


# The second whole-agent update is checked in the slow tier (each compiles the update).
SLOW = ("update_options_cosine.npz", "ac_config_options_cosine.yaml")


def _parity_of(tmp_path_factory, names):
    here = tmp_path_factory.mktemp("reference_options")
    for name in names:
        (here / name).symlink_to(REF / name)
    return run_parity(here, strict=True, print_table=False)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return _parity_of(tmp_path_factory,
                      [p.name for p in REF.iterdir() if p.is_file() and p.name not in SLOW])


@pytest.mark.slow  # compiles the tiny update
def test_strict_parity_of_the_cosine_update(tmp_path_factory):
    rows, code = _parity_of(tmp_path_factory, SLOW)
    failing = [(r.fixture, r.array, r.note) for r in rows if r.fails(strict=True)]
    assert code == 0 and not failing, failing[:10]
    checked = {r.array for r in rows if r.kind == "check"}
    assert {"u2/valnorm/high", "u2/advnorm/low", "u2/enc/mlp0/kernel"} <= checked


def test_strict_parity_passes(result):
    rows, code = result
    failing = [(r.fixture, r.array, r.note) for r in rows if r.fails(strict=True)]
    assert code == 0 and not failing, failing[:10]


def test_every_option_is_really_checked(result):
    rows, _ = result
    checked = [f"{r.fixture} {r.array}" for r in rows if r.kind == "check" and r.passed]
    for want in ("29eb964.npz linear/params/enc/kernel", "29eb964.npz cosine_lrs/params",
                 "e3f0224.npz linear/params", "e3f0224.npz cosine/params",
                 "29eb964.npz lr_cosine learning rate per step",
                 "e3f0224.npz lr_linear learning rate per step",
                 *(f"29eb964.npz {i}/" for i in ("mean_std", "min_max", "perc", "perc_corr")),
                 *(f"e3f0224.npz {i}/" for i in ("meanstd", "perc")),
                 *(f"update_options_linear.npz {r}u{i}/{a}" for r in ("", "ema_")
                   for i in (1, 2) for a in ("valnorm/mean", "advnorm/sqrs",
                                             "enc/mlp0/kernel", "mom_mu/critic/"))):
        assert any(want in c for c in checked), want


def test_the_versions_schedules_differ_and_the_fixtures_tell_them_apart():
    """29eb964 anneals the warm-up factor to 0; e3f0224's optax schedules end at 0.1 lr
    (linear) and 0.1 lr^2 (cosine, alpha = 0.1 lr): each version's arrays refute the
    other's formula."""
    cfg = OptConfig(lr=1e-3, warmup=5, anneal=20, schedule="linear", agc=0.0)
    at = lambda v, s: float(optim.learning_rate(cfg, v, s))  # noqa: E731
    assert at(Reference.V29EB964, 25) == 0.0
    assert at(Reference.E3F0224, 25) == pytest.approx(1e-4, rel=1e-6)
    cos = OptConfig(lr=1e-3, warmup=5, anneal=20, schedule="cosine", agc=0.0)
    assert float(optim.learning_rate(cos, Reference.E3F0224, 25)) == pytest.approx(1e-7,
                                                                                   rel=1e-5)
    head = _load(REF / "options_optimizer_e3f0224.npz")["lr_linear/update_norm"]
    mine = _load(REF / "options_optimizer_29eb964.npz")["lr_linear/met/update_norm"]
    assert head[-1] > 1e-5 and mine[-1] == 0.0


def test_weight_decay_masks_the_kernels_only():
    params = agent_lib.init_params(jax.random.PRNGKey(0), tiny_agent_config(),
                                   Spaces.vector(4, True, 2))
    mask = optim.weight_decay_mask(params)
    flat = jax.tree_util.tree_leaves_with_path(mask)
    names = {optim.param_name(p): m for p, m in flat}
    assert names and all(m == n.endswith("/kernel") for n, m in names.items())
    assert any(names.values()) and not all(names.values())


def test_global_clipping_scales_to_the_bound_only_above_it():
    clip = optim.clip_by_global_norm(1.0)
    big = {"a": jnp.full((4,), 2.0)}  # norm 4
    small = {"a": jnp.full((4,), 0.1)}
    out, _ = clip.update(big, clip.init(big))
    assert float(optim.global_norm(out)) == pytest.approx(1.0, rel=1e-6)
    out, _ = clip.update(small, clip.init(small))
    np.testing.assert_array_equal(out["a"], small["a"])


def test_separate_learning_rates_scale_each_module():
    cfg = tiny_agent_config(separate_lrs=True, opt=OptConfig(warmup=0))
    params = {"enc": {"w": jnp.ones(3)}, "actor": {"w": jnp.ones(3)}}
    opt = optim.make_optimizer(cfg.opt, lrs=cfg.lrs)
    grads = jax.tree.map(jnp.ones_like, params)
    updates, _ = opt.update(grads, opt.init(params), params)
    # First step: the RMS-scaled momentum of a unit gradient is 1, times -lr of the module.
    np.testing.assert_allclose(updates["enc"]["w"], -cfg.lrs.enc, rtol=1e-4)
    np.testing.assert_allclose(updates["actor"]["w"], -cfg.lrs.actor, rtol=1e-4)


@pytest.mark.parametrize("version, impl", [(Reference.V29EB964, "mean_std"),
                                           (Reference.E3F0224, "meanstd")])
def test_mean_std_normaliser_is_debiased(version, impl):
    cfg = NormConfig(impl=impl, rate=0.01, limit=1e-8)
    state = normalize.norm_init(cfg, version)
    x = jnp.array([1.0, 3.0])
    state = normalize.norm_update(state, x, cfg, version)
    offset, scale = normalize.norm_stats(state, cfg, version)
    assert float(offset) == pytest.approx(2.0, rel=1e-5)
    assert float(scale) == pytest.approx(1.0, rel=1e-3)
    assert normalize.norm_init(NormConfig(), version) == {}
    assert normalize.norm_stats({}, NormConfig(), version) == (0.0, 1.0)


def _batch(cfg, spaces, B=2, L=6, seed=0):
    rng = np.random.default_rng(seed)
    first = np.zeros((B, L), bool)
    first[:, 1] = True
    return {"obs": {"vector": jnp.asarray(rng.normal(size=(B, L, 4)), jnp.float32)},
            "action": jnp.asarray(rng.integers(0, 2, (B, L)), jnp.int32),
            "reward": jnp.asarray(rng.normal(size=(B, L)), jnp.float32),
            "is_first": jnp.asarray(first), "is_last": jnp.zeros((B, L), bool),
            "is_terminal": jnp.zeros((B, L), bool),
            "deter": jnp.zeros((B, L, cfg.rssm.deter), jnp.float32),
            "stoch": jnp.zeros((B, L, cfg.rssm.stoch), jnp.int32)}


@pytest.mark.slow  # four compiles of the tiny update
@pytest.mark.parametrize("version", [Reference.V29EB964, Reference.E3F0224])
def test_an_update_with_every_option_trains(version):
    """Two updates with every option of the version on: finite, the normalisers move,
    and the losses differ from the same update with them off."""
    tiny = tiny_agent_config()
    if version == Reference.E3F0224:
        base = head_defaults(tiny)
        on = base.__class__(**{**base.__dict__,
                               "opt": OptConfig(**{**base.opt.__dict__, "wd": 1e-2,
                                                   "schedule": "cosine", "warmup": 2,
                                                   "anneal": 10}),
                               "valnorm": NormConfig("meanstd"),
                               "advnorm": NormConfig("perc")})
    else:
        base = tiny
        on = tiny.__class__(**{**tiny.__dict__,
                               "opt": OptConfig(**{**tiny.opt.__dict__, "wd": 1e-2,
                                                   "globclip": 10.0, "schedule": "linear",
                                                   "warmup": 2, "anneal": 10}),
                               "separate_lrs": True, "reset_context": 0.5,
                               "valnorm": NormConfig("mean_std"),
                               "advnorm": NormConfig("perc_corr")})
    spaces = Spaces.vector(4, True, 2)
    batch = _batch(on, spaces)
    results = {}
    for name, cfg in (("off", base), ("on", on)):
        state = agent_lib.init(jax.random.PRNGKey(0), cfg, spaces)
        step = jax.jit(lambda s, b, k, cfg=cfg: agent_lib.update(s, cfg, spaces, b, k))
        for i in range(2):
            state, _, metrics = step(state, batch, jax.random.PRNGKey(i))
        results[name] = (state, metrics)
    state, metrics = results["on"]
    assert set(state.norms) == {"valnorm", "advnorm"}
    assert results["off"][0].norms == {}
    for v in jax.tree.leaves(state.norms):
        assert np.isfinite(v) and float(v) != 0.0
    assert all(np.isfinite(np.asarray(v)).all() for k, v in metrics.items()
               if k.endswith("_loss") and "/" not in k)
    assert float(metrics["actor_loss"]) != float(results["off"][1]["actor_loss"])
    moved = jax.tree.map(lambda a, b: bool((a != b).any()), state.params,
                         results["off"][0].params)
    assert any(jax.tree.leaves(moved))


def test_reset_context_clears_first_flags_by_its_chance():
    data = {"is_first": jnp.ones((1000, 3), bool)}
    kept = agent_lib.reset_context(data, 0.5, jax.random.PRNGKey(0))["is_first"]
    assert 400 < int(kept[:, 0].sum()) < 600 and bool(kept[:, 1:].all())
    assert bool(agent_lib.reset_context(data, 0.0, jax.random.PRNGKey(0))["is_first"].all())
    assert not bool(agent_lib.reset_context(data, 1.0, jax.random.PRNGKey(0))
                    ["is_first"][:, 0].any())


@pytest.mark.parametrize("reference, sets", [
    ("29eb964", ["opt.wd=1e-4", "opt.globclip=100", "opt.schedule=linear", "opt.anneal=5000",
                 "separate_lrs=True", "lrs.actor=1e-5", "valnorm.impl=mean_std",
                 "advnorm.impl=mean_std", "reset_context=0.5", "run.expl_until=1000"]),
    (HEAD_REF, ["agent.opt.wd=1e-4", "agent.opt.schedule=cosine", "agent.opt.anneal=5000",
                "agent.valnorm.impl=meanstd", "agent.advnorm.impl=perc"]),
])
def test_the_options_are_accepted_at_their_version(reference, sets):
    config = R.make_config("CartPole-v1", sets=sets, reference=reference)
    validate(config)
    assert config.agent.opt.wd == 1e-4


@pytest.mark.parametrize("reference, sets, message", [
    ("29eb964", ["opt.schedule=cos", "opt.anneal=10"],
     "opt.schedule: 'cos'; choose one of constant, linear, cosine"),
    ("29eb964", ["opt.schedule=linear"], "opt.anneal: 0 must exceed opt.warmup"),
    ("29eb964", ["valnorm.impl=meanstd"],
     "valnorm.impl: 'meanstd'; choose one of off, mean_std, min_max, perc, perc_corr"),
    (HEAD_REF, ["agent.advnorm.impl=min_max"],
     "agent.advnorm.impl: 'min_max'; choose one of none, meanstd, perc"),
    (HEAD_REF, ["agent.opt.schedule=cosine"], "agent.opt.anneal: 0 must exceed"),
    (HEAD_REF, ["separate_lrs=True"], "exists only at 29eb964"),
    ("29eb964", ["reset_context=1.5"], "reset_context: must be in"),
])
def test_bad_values_are_refused_naming_the_key(reference, sets, message):
    with pytest.raises(C.ConfigError, match=message.replace("(", r"\(")):
        validate(R.make_config("CartPole-v1", sets=sets, reference=reference))


@pytest.mark.slow  # compiles the tiny update
@pytest.mark.parametrize("option", ["opt.globclip", "opt.wd", "advnorm.impl"])
def test_the_update_fixture_refutes_an_option_left_out(option):
    """Our update without one of the fixture's options fails its parity rows: the
    fixture tells each option apart (global clipping shows only through the second
    step's moments, RMS scaling undoing the first step's clip)."""
    import dataclasses

    from dreamerjax.tools.parity import agent_checks

    section, field = option.split(".")
    off = {"globclip": 0.0, "wd": 0.0, "impl": "off"}[field]

    def override(cfg):
        return dataclasses.replace(cfg, **{section: dataclasses.replace(
            getattr(cfg, section), **{field: off})})

    rows = agent_checks.check_update(str(REF), "update_options_linear.npz",
                                     override=override, runs=("",))
    assert any(r.kind == "check" and not r.passed for r in rows)


def test_parity_says_which_file_it_checks_as_it_goes(tmp_path, capsys):
    """`dreamerjax parity` prints a line per file before checking it (to stderr, beside
    the table), so a run of several minutes is never silent."""
    for name in ("options_norms_29eb964.npz", "options_norms_e3f0224.npz"):
        (tmp_path / name).symlink_to(REF / name)
    _, code = run_parity(tmp_path)
    err = capsys.readouterr().err.splitlines()
    assert code == 0 and err == ["parity: options_norms_29eb964.npz (1/2)",
                                 "parity: options_norms_e3f0224.npz (2/2)"]
