"""The parity checker catches bugs: with a known bug injected into our agent (a wrong
constant, a wrong target, a swapped scale, AGC off) the agent checks fail and name an array
that moved. Each case runs the checker's own loss or update comparison in-process on the
small centered fixtures (one two-hot draw instead of three, to stay fast)."""

import dataclasses
from pathlib import Path

import jax
import pytest

from dreamerjax.algo import agent as agent_lib
from dreamerjax.tools.parity import agent_checks

REF = str(Path(__file__).parent / "data" / "reference")
rep = dataclasses.replace


_LOSS_FN = agent_lib.loss_fn


def _fast_critic_target(params, slow, *args, **kwargs):
    """The bug: regularise the critic (imagined and replayed) towards the fast critic: the
    loss sees the fast critic where the slow one goes (the slow critic is only that
    target: slowtar False)."""
    del slow
    return _LOSS_FN(params, params["critic"], *args, **kwargs)


MUTATIONS = {
    "free bits 0.5": (lambda c: rep(c, free_nats=0.5), None, {"loss_dyn", "loss_rep"}),
    "latent unimix 0": (lambda c: rep(c, rssm=rep(c.rssm, unimix=0.0)), None,
                        {"replay_outs_logit", "diag_imag_logit"}),
    "actor unimix 0": (lambda c: rep(c, actor_unimix=0.0), None,
                       {"diag_imag_actor_probs", "diag_logpi"}),
    "slowreg 0": (lambda c: rep(c, slowreg=0.0), None, {"loss_critic", "loss_replay_critic"}),
    "return lambda 0.9": (lambda c: rep(c, return_lambda=0.9), None, {"diag_ret"}),
    "critic regularised towards the fast critic": (
        None, _fast_critic_target, {"diag_imag_slowval", "loss_critic"}),
    "rep and dyn scales swapped": (
        lambda c: rep(c, loss_scales=rep(c.loss_scales, rep=c.loss_scales.dyn,
                                         dyn=c.loss_scales.rep)), None, {"loss_dyn", "loss_rep"}),
    "replay critic scale 1": (
        lambda c: rep(c, loss_scales=rep(c.loss_scales, replay_critic=1.0)), None,
        {"loss_replay_critic"}),
}


def _failing(rows):
    return {r.array for r in rows if not r.passed}


@pytest.fixture
def one_draw(monkeypatch):
    monkeypatch.setattr(agent_checks, "DRAWS", 1)


def test_unmutated_loss_check_passes(one_draw):
    rows = agent_checks.check_ac(REF, "ac_loss_centered.npz")
    assert len(rows) > 130 and not _failing(rows)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_injected_bug_fails_the_loss_check(name, one_draw, monkeypatch):
    override, loss_fn, moved = MUTATIONS[name]
    if loss_fn is not None:
        monkeypatch.setattr(agent_lib, "loss_fn", loss_fn)
    failing = _failing(agent_checks.check_ac(REF, "ac_loss_centered.npz", override=override))
    assert failing & moved, (name, sorted(failing)[:10])


def test_agc_off_fails_the_update_check(one_draw):
    rows = agent_checks.check_update(
        REF, "update_centered.npz", override=lambda c: rep(c, opt=rep(c.opt, agc=0.0)),
        runs=("",), steps=1)
    failing = _failing(rows)
    # Without AGC the first step's sign(g) * lr is unchanged, but the second moments
    # (g^2 of the unclipped gradient) move.
    assert any(a.startswith("u1/rms_nu/") for a in failing), sorted(failing)[:10]


def test_twohot_rounding_bound_covers_both_summation_orders():
    """The per-row bound the agent checks use for two-hot expectations holds for the
    reference's own jitted means (fixture a, against float64) and between our two orders
    on logits that put mass on the outer bins, as the perturbed fixtures do."""
    import numpy as np

    from dreamerjax.algo import numerics as nm

    d = np.load(Path(REF) / "twohot.npz")
    bins = nm.twohot_bins(255)
    ref = agent_checks.compare("twohot.npz", "mean_jit", d["mean_jit"], d["mean_f64"],
                               agent_checks.twohot_bound(d["logits"], bins, sides=1))
    assert ref.passed, ref
    logits = 0.05 * jax.random.normal(jax.random.PRNGKey(0), (512, 255)) * 20
    exact = jax.jit(nm.twohot_mean)(logits, bins)
    pairsum = jax.jit(nm.twohot_mean_pairsum)(logits, bins)
    row = agent_checks.compare("random", "pairsum vs exact", pairsum, exact,
                               agent_checks.twohot_bound(logits, bins))
    assert row.passed and row.max_abs_err > 0, row


# ----------------------------------------------------------------------------- HEAD (e3f0224)

HEAD_REF_DIR = str(Path(__file__).parent / "data" / "reference_head")


def _data_start_weight(params, cfg, data, tfeat, flat):
    """The bug: 29eb964's imagination start (data reward and continue at t = 0)."""
    return _imagined_rew_con(params, rep(cfg, reference="29eb964"), data, tfeat, flat)


_imagined_rew_con = agent_lib.imagined_rew_con
_actor_out = agent_lib.actor_out


def _unimix_policy(p, cfg, spaces, x):
    """The bug: 29eb964's 1% uniform mixed into HEAD's categorical policy."""
    from dreamerjax.algo import numerics as nm
    return nm.unimix_logits(_actor_out(p, cfg, spaces, x), 0.01)


def _deter_first(lat, version):
    """The bug: 29eb964's decoder input order [deter, stoch]."""
    return agent_lib.nets.feat(lat)


HEAD_MUTATIONS = {
    "free nats 6": (lambda c: rep(c, free_nats=6.0), {}, {"loss/dyn", "loss/rep"}),  # KL 1-2.0
    "slowreg 0": (lambda c: rep(c, slowreg=0.0), {}, {"loss/value", "loss/repval"}),
    "imagination weight from the data's continue": (
        None, {(agent_lib, "imagined_rew_con"): _data_start_weight},
        {"diag/imag/weight", "diag/imag/rew"}),
    "policy with unimix": (None, {(agent_lib, "actor_out"): _unimix_policy},
                           {"diag/imag/logpi", "diag/imag/ent/action"}),
    "decoder input [deter, stoch]": (None, {(agent_lib.nets, "_decoder_input"): _deter_first},
                                     {"diag/dec/vector/pred", "loss/vector"}),
}


def test_unmutated_head_loss_check_passes(one_draw):
    from dreamerjax.tools.parity import head_checks
    rows = head_checks.check_head_loss(HEAD_REF_DIR, "head_loss_small_pert_s0.npz")
    assert len(rows) > 55 and not _failing(rows)


@pytest.mark.parametrize("name", sorted(HEAD_MUTATIONS))
def test_injected_bug_fails_the_head_loss_check(name, one_draw, monkeypatch):
    from dreamerjax.tools.parity import head_checks
    override, patches, moved = HEAD_MUTATIONS[name]
    for (module, attr), fn in patches.items():
        monkeypatch.setattr(module, attr, fn)
    failing = _failing(head_checks.check_head_loss(HEAD_REF_DIR, "head_loss_small_pert_s0.npz",
                                                   override=override))
    assert failing & moved, (name, sorted(failing)[:10])
