"""Whole-agent parity: fixtures f/i (world model), g/i/j (full loss), h/i/j (two train
steps), the centered g/h and the continuous eps variant pass with `dreamerjax parity
--strict`, and every listed array is compared."""

from pathlib import Path

import numpy as np
import pytest

from dreamerjax.tools.parity import fixtures

REF = Path(__file__).parent / "data" / "reference"
AGENT = ("wm_loss.npz", "ac_loss.npz", "ac_loss_centered.npz", "update.npz",
         "update_centered.npz", "wm_loss_image.npz", "ac_loss_image.npz", "update_image.npz",
         "ac_loss_cont.npz", "update_cont.npz", "ac_loss_cont_eps.npz", "update_cont_eps.npz")


@pytest.fixture(scope="module")
def result(reference_parity):
    return reference_parity


def test_strict_parity_passes(result):
    rows, code = result
    bad = [r for r in rows if r.fails(strict=True)]
    assert not bad, bad[:10]
    assert code == 0


def test_agent_fixtures_are_really_checked(result):
    rows, _ = result
    checked = [r for r in rows if r.fixture in AGENT and r.kind == fixtures.CHECK]
    by_file = {f: [r for r in checked if r.fixture == f] for f in AGENT}
    assert len(by_file["wm_loss.npz"]) >= 15
    # every scalar metric of the reference's loss and of both train steps
    d = np.load(REF / "ac_loss.npz")
    mets = {k[4:] for k in d.files if k.startswith("met_")}
    names = {r.array for r in by_file["ac_loss.npz"]}
    assert {f"met/{m}" for m in mets} <= names
    u = np.load(REF / "update.npz")
    params = [k for k in u.files if k.startswith("u2/state/agent/")
              and k.split("/")[3] in ("enc", "dyn", "dec", "rew", "con", "actor", "critic")]
    names = {r.array for r in by_file["update.npz"]}
    for k in params:
        assert "u2/" + k[len("u2/state/agent/"):] in names, k
    assert any(n.startswith("ema_u2/mom_mu/") for n in names)


def test_image_and_continuous_paths_are_compared(result):
    rows, _ = result
    names = {(r.fixture, r.array) for r in rows if r.kind == fixtures.CHECK}
    for fx in ("wm_loss_image.npz", "ac_loss_image.npz"):
        for a in ("loss_image", "loss_vector", "diag_dec_image_mode", "diag_embed"
                  if fx.startswith("wm") else "embed"):
            assert (fx, a) in names, (fx, a)
    for fx in ("ac_loss_cont.npz", "ac_loss_cont_eps.npz"):
        for a in ("diag_imag_actor_mean", "diag_imag_actor_std", "diag_logpi", "diag_actor_ent",
                  "met/rand/action/mean"):
            assert (fx, a) in names, (fx, a)
    u = np.load(REF / "update_cont_eps.npz")
    moved = [k for k in u.files if k.startswith("u1/state/agent/actor/action/out/")]
    assert moved and all(("update_cont_eps.npz", "u1/" + k[len("u1/state/agent/"):]) in names
                         for k in moved)
