"""Whole-agent parity: fixtures f (world model), g (full loss), h (two train steps) and the
centered g/h pass with `dreamerjax parity --strict`, and every listed array is compared."""

from pathlib import Path

import numpy as np
import pytest

from dreamerjax.parity import fixtures, run_parity

REF = Path(__file__).parent / "data" / "reference"
AGENT = ("wm_loss.npz", "ac_loss.npz", "ac_loss_centered.npz", "update.npz",
         "update_centered.npz")


@pytest.fixture(scope="module")
def result():
    return run_parity(REF, strict=True, print_table=False)


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
