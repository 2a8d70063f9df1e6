"""Parity with the reference's own data-parallel update: the `*dp2*` files of
tests/data/reference (29eb964) and tests/data/reference_head (HEAD e3f0224), made by running
the reference on 2 CPU devices (their READMEs), pass `dreamerjax parity --strict` with a
row for every array the single-device update files check. The command adds the host
devices the files need, so the child here runs it as users do."""

import subprocess
import sys
from pathlib import Path

import pytest
from _xla import users_build_env

from dreamerjax.tools.parity.agent_checks import data_devices_of

DATA = Path(__file__).parent / "data"
# Each dp2 file with the inputs it shares with its single-device family.
FAMILIES = {
    "reference": {"update_dp2.npz": ["ac_config.yaml"],
                  "update_image_dp2.npz": ["ac_config_image.yaml"]},
    "reference_head": {
        "head_update_small_pert_dp2_s0.npz": ["head_config_small_pert_s0.yaml",
                                              "head_params_start_small_pert_s0.npz"],
        "head_update_small_image_pert_dp2_s0.npz": ["head_config_small_image_pert_s0.yaml",
                                                    "head_params_start_small_image_pert_s0.npz"]},
}


def _parity(directory: Path) -> subprocess.CompletedProcess:
    """The command as users run it, compiled as their programs compile (users_build_env:
    without the tier's quick code generation, under which HEAD's update moves 2 elements
    whose gradients nearly cancel by a whole other learning-rate step)."""
    return subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", "parity", "--strict",
                           str(directory)], env=users_build_env(), capture_output=True,
                          text=True, timeout=1500)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """{file: its checked row names} after one strict parity run per fixture folder."""
    rows = {}
    for folder, files in FAMILIES.items():
        here = tmp_path_factory.mktemp(folder)
        for name, companions in files.items():
            for n in (name, *companions):
                if not (here / n).exists():
                    (here / n).symlink_to(DATA / folder / n)
        proc = _parity(here)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        summary = proc.stdout.strip().splitlines()[-1]
        assert "OK (0 failing rows)" in summary and "Mode: strict" in summary, summary
        for line in proc.stdout.splitlines():
            parts = line.split()
            if parts and parts[0] in files and parts[-1] == "PASS":
                rows.setdefault(parts[0], set()).add(parts[1])
    return rows


def test_every_dp2_file_is_in_the_fixture_folders():
    found = {p.name for f in FAMILIES for p in (DATA / f).iterdir()
             if data_devices_of(p.name) > 1}
    assert found == {n for files in FAMILIES.values() for n in files}


def test_dp2_update_passes_strict_parity_for_both_versions(checked):
    assert set(checked) == {n for files in FAMILIES.values() for n in files}


@pytest.mark.parametrize("dp2, single", [("update_dp2.npz", "update.npz"),
                                         ("update_image_dp2.npz", "update_image.npz")])
def test_dp2_rows_cover_the_single_device_rows(checked, dp2, single):
    """Every array the single-device update file of the family holds for update 1 and 2
    (parameters, slow critic, optimiser moments, normaliser, replay write-back, carry,
    metrics) has a passing row in the 2-device file."""
    import numpy as np

    with np.load(DATA / "reference" / single) as one, np.load(DATA / "reference" / dp2) as two:
        assert {k for k in one.files if k.startswith(("u1/", "u2/"))} <= set(two.files)
    rows = checked[dp2]
    for step in ("u1/", "u2/"):
        mine = {r for r in rows if r.startswith(step)}
        assert {f"{step}retnorm/low", f"{step}replay/deter", f"{step}carry/deter"} <= mine
        assert len(mine) > 250, (step, len(mine))
    assert {"met/opt_loss", "met/opt_grad_norm"} <= rows  # the metrics' rows
