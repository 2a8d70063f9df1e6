"""Whole-agent parity: fixtures f/i (world model), g/i/j (full loss), h/i/j (two train
steps), the centered g/h and the continuous eps variant pass with `dreamerjax parity
--strict`, and every listed array is compared."""

from pathlib import Path

import _parity
import numpy as np
import pytest

from dreamerjax.tools.parity import fixtures

REF = Path(__file__).parent / "data" / "reference"


@pytest.mark.parametrize("name", _parity.FILES)
def test_strict_parity_passes(name):
    """`dreamerjax parity --strict` on the directory, file by file: no row of any file
    fails strictly (no failure, error, unknown or unsupported file)."""
    bad = [r for r in _parity.rows(name) if r.fails(strict=True)]
    assert not bad, bad[:10]


def _checked(name):
    return [r for r in _parity.rows(name) if r.kind == fixtures.CHECK]


def test_world_model_fixture_is_really_checked():
    assert len(_checked("wm_loss.npz")) >= 15


def test_loss_fixture_compares_every_metric():
    """Every scalar metric of the reference's loss is a row."""
    d = np.load(REF / "ac_loss.npz")
    mets = {k[4:] for k in d.files if k.startswith("met_")}
    assert {f"met/{m}" for m in mets} <= {r.array for r in _checked("ac_loss.npz")}


def test_update_fixture_compares_every_parameter_of_both_steps():
    u = np.load(REF / "update.npz")
    params = [k for k in u.files if k.startswith("u2/state/agent/")
              and k.split("/")[3] in ("enc", "dyn", "dec", "rew", "con", "actor", "critic")]
    names = {r.array for r in _checked("update.npz")}
    for k in params:
        assert "u2/" + k[len("u2/state/agent/"):] in names, k
    assert any(n.startswith("ema_u2/mom_mu/") for n in names)


@pytest.mark.parametrize("fx", ["wm_loss_image.npz", "ac_loss_image.npz", "ac_loss_cont.npz",
                                "ac_loss_cont_eps.npz", "update_cont_eps.npz"])
def test_image_and_continuous_paths_are_compared(fx):
    names = {(r.fixture, r.array) for r in _checked(fx)}
    if fx.endswith("_image.npz"):
        for a in ("loss_image", "loss_vector", "diag_dec_image_mode", "diag_embed"
                  if fx.startswith("wm") else "embed"):
            assert (fx, a) in names, (fx, a)
    if fx.startswith("ac_loss_cont"):
        for a in ("diag_imag_actor_mean", "diag_imag_actor_std", "diag_logpi", "diag_actor_ent",
                  "met/rand/action/mean"):
            assert (fx, a) in names, (fx, a)
    if fx == "update_cont_eps.npz":
        u = np.load(REF / fx)
        moved = [k for k in u.files if k.startswith("u1/state/agent/actor/action/out/")]
        assert moved and all((fx, "u1/" + k[len("u1/state/agent/"):]) in names
                             for k in moved)


@pytest.mark.slow  # compiles every fixture's programs at XLA's default optimisation: ~3 min
def test_users_build_passes_strict_parity_on_the_command_line():
    """The command users run, compiled as users' programs compile: the default tier
    compiles with quick code generation (conftest.py), so here XLA_FLAGS loses those
    options whatever the tier's setting, and every row passes strictly as in-process."""
    import subprocess
    import sys

    from _xla import users_build_env

    env = users_build_env()
    proc = subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", "parity", "--strict",
                           str(REF)], env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert "OK (0 failing rows)" in summary and "Mode: strict" in summary, summary
    checked = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    # Every file of the reference's results has its rows (*_params*: their inputs).
    results = {n for n in _parity.FILES if n.endswith(".npz") and "_params" not in n}
    assert results <= checked, results - checked
