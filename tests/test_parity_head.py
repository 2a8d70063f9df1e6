"""Parity with the reference's HEAD (e3f0224): its own arrays at a small model shape
(tests/data/reference_head, benchmarks/reference_head/make_small.py) pass `parity --strict`,
with every family's loss checked; the parameter counts equal HEAD's."""

from pathlib import Path

import jax
import numpy as np
import pytest

from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo.spaces import Spaces
from dreamerjax.config.defaults import HEAD_REF, agent_config
from dreamerjax.tools.parity import head_checks
from dreamerjax.tools.parity.agent_checks import data_devices_of
from dreamerjax.tools.parity.fixtures import run_parity

REF = Path(__file__).parent / "data" / "reference_head"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """The rows of every single-device file (the data-parallel `*dpN*` files need N devices:
    tests/test_parity_data_parallel.py checks them in a child with host devices)."""
    here = tmp_path_factory.mktemp("reference_head")
    for path in REF.iterdir():
        if data_devices_of(path.name) == 1:
            (here / path.name).symlink_to(path)
    return run_parity(here, strict=True, print_table=False)


def test_strict_parity_passes(result):
    rows, code = result
    failing = [(r.fixture, r.array, r.note) for r in rows if r.fails(strict=True)]
    assert code == 0 and not failing, failing[:10]


def test_every_family_is_really_checked(result):
    rows, _ = result
    checked = [r for r in rows if r.kind == "check"]
    for fam in ("_small_pert", "_small_image_pert", "_small_cont_pert_eps"):
        mine = {r.array for r in checked if r.fixture == f"head_loss{fam}_s0.npz"}
        # loss terms, the total, outputs, imagination, every metric of HEAD's loss
        assert {"loss/total", "loss/dyn", "loss/policy", "loss/repval", "outs/tokens",
                "diag/imag/weight", "diag/imag/ret", "met/dyn_ent", "met/ret"} <= mine, fam
        assert len(mine) > 55, (fam, len(mine))
    image = {r.array for r in checked if r.fixture == "head_loss_small_image_pert_s0.npz"}
    assert {"loss/image", "met/loss/image"} <= image
    cont = {r.array for r in checked if r.fixture == "head_loss_small_cont_pert_eps_s0.npz"}
    assert "met/ent/action" in cont and "met/rand/action" not in cont  # HEAD's Agg hides it


def test_version_comes_from_the_fixture_config():
    cfg = head_checks.config_from_head_yaml(str(REF / "head_config_small_pert_s0.yaml"))
    assert cfg.reference == HEAD_REF and cfg.actor_unimix == 0.0
    with pytest.raises(ValueError, match="not a config of"):
        head_checks.config_from_head_yaml(
            str(Path(__file__).parent / "data" / "reference" / "ac_config.yaml"))


@pytest.mark.parametrize("spaces, count", [
    (Spaces.vector(4, True, 2), 637_381),  # the fixture README's counts
    (Spaces((("image", (64, 64, 3), "uint8"), ("vector", (3,), "float32")),
                      True, 3), 748_664),
    (Spaces.vector(5, False, 2), 637_640),
])
def test_parameter_counts_equal_heads(spaces, count):
    cfg = agent_config("1m", reference=HEAD_REF)
    params = jax.eval_shape(lambda: agent_lib.init_params(jax.random.PRNGKey(0), cfg, spaces))
    assert agent_lib.param_counts(params)["total"] == count


def test_name_map():
    assert head_checks.our_name("dec/sp1norm/scale") == ("dec", "space1hid/norm/scale")
    assert head_checks.our_name("dec/spnorm/scale") == ("dec", "spacenorm/scale")
    assert head_checks.our_name("dyn/dynhid0norm/scale") == ("dyn", "dyn0/norm/scale")
    assert head_checks.our_name("pol/head/action/stddev/bias") == ("actor", "action/std/bias")
    assert head_checks.our_name("dec/mlp/norm2/scale") == ("dec", "mlp2/norm/scale")
    assert head_checks.our_name("slowval/mlp/linear0/kernel") == ("slow", "h0/kernel")
    assert head_checks.our_name("opt/step/value") is None


def test_rows_reported_for_information_never_fail():
    """A compared row kept for information only (HEAD's update 2 of the continuous
    mode-patch family) prints its errors but fails no run, strict or not, however far
    off it is; an ordinary row that far off fails."""
    from dreamerjax.tools.parity.fixtures import as_info, compare

    row = compare("f.npz", "u2/x", np.ones(3), np.zeros(3), atol=1e-6, tol="atol 1e-6")
    assert row.fails() and row.status == "FAIL"
    shown = as_info(row, "why")
    assert not shown.fails() and not shown.fails(strict=True)
    assert shown.status == "info" and shown.note == "why"
    assert (shown.max_abs_err, shown.tolerance) == (row.max_abs_err, row.tolerance)
