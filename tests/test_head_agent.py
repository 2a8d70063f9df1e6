"""The HEAD (e3f0224) agent beside 29eb964's: what the parity fixtures (float32) cannot
show, under bfloat16 and on other image sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _runs import small_argv

from dreamerjax.algo import agent as A
from dreamerjax.algo import nets
from dreamerjax.algo import numerics as nm
from dreamerjax.algo.spaces import Spaces
from dreamerjax.config.defaults import HEAD_REF, Reference, head_defaults, tiny_agent_config
from dreamerjax.data import schema
from dreamerjax.tools import args as cli_args

IMG = Spaces((("image", (48, 48, 3), "uint8"), ("vector", (3,), "float32")), True, 3)


def _cfg(dtype="float32"):
    return head_defaults(tiny_agent_config(compute_dtype=dtype))


def test_norm_in_float32_under_bfloat16():
    x = jax.random.normal(jax.random.PRNGKey(0), (64, 96)).astype(jnp.bfloat16) * 30
    scale = jnp.linspace(0.5, 1.5, 96)
    head = nm.rms_norm(x, scale, in_f32=True)
    want = nm.rms_norm(x.astype(jnp.float32), scale).astype(jnp.bfloat16)
    assert head.dtype == jnp.bfloat16 and bool(jnp.all(head == want))
    assert not bool(jnp.all(nm.rms_norm(x, scale) == want))  # 29eb964's differs


def test_latent_logits_kept_raw_and_mixed_in_float32():
    cfg = _cfg("bfloat16")
    raw = jax.random.normal(jax.random.PRNGKey(1), (5, cfg.rssm.stoch, cfg.rssm.classes))
    raw = raw.astype(jnp.bfloat16)
    mixed = nets.latent_dist_logits(cfg.rssm, raw, Reference.E3F0224)
    assert mixed.dtype == jnp.float32
    np.testing.assert_array_equal(mixed, nm.unimix_logits(raw.astype(jnp.float32), 0.01))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_head_update_runs_finite(dtype):
    cfg = _cfg(dtype)
    # One compiled init (eagerly, each of its ops compiles on its own: slower).
    state0 = jax.jit(lambda k: A.init(k, cfg, IMG))(jax.random.PRNGKey(0))
    state = state0
    specs = schema.batch_spec(IMG, cfg.rssm.deter, cfg.rssm.stoch, 2, 5)
    rng = np.random.default_rng(0)
    batch = jax.tree.map(lambda s: jnp.asarray(rng.integers(0, 2, s.shape).astype(s.dtype)),
                         specs)
    state, outs, mets = jax.jit(lambda s, b: A.update(s, cfg, IMG, b, jax.random.PRNGKey(1)))(
        state, batch)
    assert np.isfinite(float(mets["opt_loss"])) and "dyn_ent" in mets and "loss/image" in mets
    assert outs["replay"]["stoch"].dtype == jnp.int32
    # HEAD's slow value starts as a copy of the critic and mixes 2 % of the new one from
    # the first update on (29eb964's would be an exact copy after update 1).
    old, new, slow = (state0.params["critic"]["h0"]["kernel"],
                      state.params["critic"]["h0"]["kernel"], state.slow["h0"]["kernel"])
    np.testing.assert_array_equal(state0.slow["h0"]["kernel"], old)
    np.testing.assert_allclose(slow, 0.02 * new + 0.98 * old, rtol=1e-6, atol=1e-9)
    assert not np.array_equal(slow, new)


def test_head_cnn_resolution_comes_from_the_image():
    cfg = _cfg()
    enc = nets.cnn_config(cfg, cfg.enc, IMG, IMG.enc_image_keys)
    assert enc.minres == 48 // 16
    bad = Spaces((("image", (40, 40, 3), "uint8"),), True, 3)
    with pytest.raises(ValueError, match="whole side in"):
        nets.cnn_config(cfg, cfg.enc, bad, bad.enc_image_keys)


def test_image_geometry_is_checked_per_version_before_building():
    """MinAtar's 10 x 10 frames: each version's own rule, in one line naming what to set,
    at setup (before anything is compiled), and HEAD's suggestion is one that works."""
    from dreamerjax.run.setup import make_setup
    from dreamerjax.tools import cli

    pytest.importorskip("gymnax")

    def setup(*flags):
        argv = ["train", *small_argv(), "--env", "gymnax_Breakout-MinAtar", *flags,
                "--out", "/nonexistent/run"]
        return make_setup(cli_args.config_from_args(cli.parse(argv).validate()))

    with pytest.raises(ValueError, match=r"does not reach minres 4 .* --cnn-mults 1 2 "
                                         r"--cnn-minres 5"):
        setup()
    assert setup("--cnn-mults", "1", "2", "--cnn-minres", "5").spaces is not None
    with pytest.raises(ValueError, match=r"end at 0.625 pixels; .* e.g. --cnn-mults 4$"):
        setup("--reference", HEAD_REF)
    # one stage of depth 4 x 1: 5 x 5 x 4 = 100 units, not 8 blocks (the reference asserts)
    with pytest.raises(ValueError, match=r"has 100 units .* dec.simple.block_space=8"):
        setup("--reference", HEAD_REF, "--cnn-mults", "1")
    assert setup("--reference", HEAD_REF, "--cnn-mults", "4").spaces is not None


def test_reference_field_selects_the_version():
    assert tiny_agent_config().reference == "29eb964" and _cfg().reference == HEAD_REF
