"""Contracts of the agent: shapes, gradients, learning on a fixed batch, resets, vmap."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.algo import agent as A
from dreamerjax.algo import nets
from dreamerjax.algo.spaces import Spaces, preprocess
from dreamerjax.config.defaults import SIZES, agent_config, tiny_agent_config
from dreamerjax.config.resolve import make_config
from dreamerjax.data import schema

VEC = Spaces.vector(4, True, 2)
IMG = Spaces((("image", (16, 16, 3), "uint8"), ("vector", (3,), "float32")), True, 3)


def _cnn(cfg):
    """A CNN small enough for 16 x 16 test images (the image fixtures' geometry)."""
    rep = dataclasses.replace
    return rep(cfg, enc=rep(cfg.enc, depth=4, mults=(1, 2), minres=8),
               dec=rep(cfg.dec, depth=4, mults=(1, 2), minres=8))


def _obs(key, spaces, shape):
    """Random observations {name: [*shape, *obs shape]} in the stored dtypes."""
    out = {}
    for (name, s, dtype), k in zip(spaces.obs, jax.random.split(key, len(spaces.obs)),
                                   strict=True):
        if dtype == "uint8":
            out[name] = jax.random.randint(k, (*shape, *s), 0, 256).astype(jnp.uint8)
        else:
            out[name] = jax.random.normal(k, (*shape, *s))
    return out


def _batch(key, cfg, spaces, B=3, L=9):
    ks = jax.random.split(key, 4)
    act = (jax.random.randint(ks[0], (B, L), 0, spaces.act_dim) if spaces.act_discrete
           else jax.random.uniform(ks[0], (B, L, spaces.act_dim), minval=-1, maxval=1))
    is_first = jnp.zeros((B, L), bool).at[:, 1].set(True)
    is_last = jnp.zeros((B, L), bool).at[0, 5].set(True)
    return {
        "obs": _obs(ks[1], spaces, (B, L)),
        "action": act,
        "reward": jnp.ones((B, L)).at[:, 1].set(0.0),
        "is_first": is_first, "is_last": is_last, "is_terminal": is_last,
        "deter": jax.random.normal(ks[2], (B, L, cfg.rssm.deter)),
        "stoch": jax.random.randint(ks[3], (B, L, cfg.rssm.stoch), 0, cfg.rssm.classes),
    }


def test_reference_param_count_1m_cartpole():
    """The reference's 1m CartPole agent has 637,511 optimised variables."""
    p = jax.eval_shape(lambda k: A.init_params(k, agent_config("1m"), VEC),
                       jax.random.PRNGKey(0))
    counts = A.param_counts(p)
    assert counts == {"enc": 8832, "dyn": 364160, "dec": 49796, "rew": 57728, "con": 41153,
                      "actor": 49666, "critic": 66176, "total": 637511}


@pytest.mark.parametrize("size", sorted(SIZES))
def test_param_shapes_every_preset(size):
    cfg = agent_config(size)
    image = Spaces((("image", (64, 64, 3), "uint8"),), True, 6)
    for spaces in (VEC, image, Spaces.vector(3, False, 1)):
        p = jax.eval_shape(lambda k, c=cfg, s=spaces: A.init_params(k, c, s),
                           jax.random.PRNGKey(0))
        d, g = cfg.rssm.deter, cfg.rssm.blocks
        assert p["dyn"]["dyncore"]["kernel"].shape == (g, d // g, 3 * d // g)
        assert p["critic"]["dist"]["out"]["kernel"].shape == (cfg.critic.units, 256)
        assert p["actor"]["action"]["out"]["kernel"].shape[-1] == spaces.act_dim


@pytest.mark.parametrize("obs, match", [
    ((("grid", (4, 4), "float32"),), "observation key 'grid' has shape"),
    ((("vector", (4,), "uint8"),), "observation key 'vector': vectors must be float32"),
    ((("image", (8, 8, 3), "int64"),), "observation key 'image' has dtype int64"),
    ((("reward", (1,), "float32"),), "observation key 'reward' is reserved"),
    ((("a", (8, 8, 3), "uint8"), ("b", (4, 4, 1), "uint8")), "must share one height"),
    ((), "Spaces.obs is empty"),
])
def test_bad_spaces_are_refused(obs, match):
    with pytest.raises(ValueError, match=match):
        Spaces(obs, True, 2)
    with pytest.raises(ValueError, match="Unsupported action space"):
        Spaces.vector(4, True, 1)


def test_spaces_select_keys_by_regex_and_order():
    sp = Spaces((("image", (8, 8, 3), "uint8"), ("pos", (2,), "float32"),
                   ("vel", (2,), "float32")), True, 2, enc_spaces="image|pos", dec_spaces="v.*")
    assert sp.enc_vector_keys == ("pos",) and sp.enc_image_keys == ("image",)
    assert sp.dec_keys == ("vel",)
    assert {k: v.dtype for k, v in schema.obs_spec(sp, (2,)).items()} == {
        "image": np.uint8, "pos": np.float32, "vel": np.float32}
    hash(sp)  # a static jit argument
    with pytest.raises(ValueError, match="enc_spaces 'nothing' matches none"):
        Spaces(sp.obs, True, 2, enc_spaces="nothing")


def test_two_seeds_differ_and_init_is_deterministic():
    cfg = tiny_agent_config()
    a = A.init_params(jax.random.PRNGKey(0), cfg, VEC)
    b = A.init_params(jax.random.PRNGKey(1), cfg, VEC)
    a2 = A.init_params(jax.random.PRNGKey(0), cfg, VEC)
    k = a["dyn"]["dyn0"]["kernel"]
    assert not np.allclose(k, b["dyn"]["dyn0"]["kernel"])
    np.testing.assert_array_equal(k, a2["dyn"]["dyn0"]["kernel"])
    # Zero-initialised outputs (outscale 0) as the reference.
    assert float(jnp.abs(a["critic"]["dist"]["out"]["kernel"]).max()) == 0.0


# The continuous and image updates compile programs of their own; the default tier checks
# both against the reference's own updates (every metric and parameter after two steps:
# tests/test_parity_agent.py, update_cont.npz and update_image.npz).
@pytest.mark.parametrize("spaces", [
    VEC, pytest.param(Spaces.vector(3, False, 2), marks=pytest.mark.slow),
    pytest.param(IMG, marks=pytest.mark.slow)], ids=["disc", "cont", "image"])
def test_update_finite_and_metrics(spaces):
    cfg = _cnn(tiny_agent_config())
    state = A.init(jax.random.PRNGKey(0), cfg, spaces)
    batch = _batch(jax.random.PRNGKey(1), cfg, spaces)
    state2, outs, mets = jax.jit(lambda s, b: A.update(s, cfg, spaces, b,
                                                        jax.random.PRNGKey(2)))(state, batch)
    for name in (*(f"{k}_loss" for k in spaces.dec_keys), "reward_loss", "cont_loss",
                 "dyn_loss", "rep_loss",
                 "actor_loss", "critic_loss", "replay_critic_loss", "ent/action/mean",
                 "adv/std", "ret/mean", "val/std", "activation/embed", "opt_grad_norm",
                 "opt_param_norm", "opt_update_norm", "opt_loss"):
        assert np.isfinite(mets[name]), name
    assert int(mets["opt_grad_steps"]) == 1
    assert outs["replay"]["deter"].shape == (3, 8, cfg.rssm.deter)
    assert outs["replay"]["stoch"].dtype == jnp.int32
    # Warmup 1000: the first update is exactly zero; the slow critic is a copy.
    np.testing.assert_array_equal(state2.params["critic"]["h0"]["kernel"],
                                  state.params["critic"]["h0"]["kernel"])
    np.testing.assert_array_equal(state2.slow["h0"]["kernel"],
                                  state2.params["critic"]["h0"]["kernel"])


# The tiny agent without warmup, at a rate that moves the loss within 50 updates: one
# compiled update for both tests below (the vmapped update is the only other program).
_TINY = tiny_agent_config()
NO_WARMUP = dataclasses.replace(_TINY, opt=dataclasses.replace(_TINY.opt, warmup=0, lr=1e-3))
_update_no_warmup = jax.jit(lambda s, b, k: A.update(s, NO_WARMUP, VEC, b, k))


def test_loss_falls_on_fixed_batch():
    cfg = NO_WARMUP
    state = A.init(jax.random.PRNGKey(0), cfg, VEC)
    batch = _batch(jax.random.PRNGKey(1), cfg, VEC)
    first = None
    for i in range(50):
        state, _, mets = _update_no_warmup(state, batch, jax.random.PRNGKey(i))
        wm = float(mets["vector_loss"] + mets["reward_loss"] + mets["cont_loss"])
        first = wm if first is None else first
    assert wm < 0.75 * first, (first, wm)


def test_is_first_ignores_the_carry():
    cfg = tiny_agent_config(sample_mode=True)
    p = A.init_params(jax.random.PRNGKey(0), cfg, VEC)
    obs = {"vector": jnp.ones((2, 4))}
    first = jnp.array([True, True])
    c0 = A.policy_initial(cfg, VEC, 2)
    c1 = {"deter": jnp.full_like(c0["deter"], 3.0), "stoch": jnp.ones_like(c0["stoch"]),
          "action": jnp.ones_like(c0["action"])}
    key = jax.random.PRNGKey(0)
    _, a, la = A.policy(p, cfg, VEC, c0, obs, first, key)
    _, b, lb = A.policy(p, cfg, VEC, c1, obs, first, key)
    np.testing.assert_array_equal(a["deter"], b["deter"])
    np.testing.assert_array_equal(la["stoch"], lb["stoch"])
    _, d, _ = A.policy(p, cfg, VEC, c1, obs, ~first, key)
    assert not np.allclose(a["deter"], d["deter"])


def test_vmap_update_equals_separate_updates():
    cfg = NO_WARMUP
    states = [A.init(jax.random.PRNGKey(s), cfg, VEC) for s in (0, 1)]
    batches = [_batch(jax.random.PRNGKey(10 + s), cfg, VEC) for s in (0, 1)]
    keys = [jax.random.PRNGKey(20 + s) for s in (0, 1)]
    fn = lambda s, b, k: A.update(s, cfg, VEC, b, k)  # noqa: E731
    stack = lambda xs: jax.tree.map(lambda *v: jnp.stack(v), *xs)  # noqa: E731
    vs, _, vm = jax.jit(jax.vmap(fn))(stack(states), stack(batches), jnp.stack(keys))
    for i in range(2):
        s, _, m = _update_no_warmup(states[i], batches[i], keys[i])
        np.testing.assert_allclose(vm["opt_loss"][i], m["opt_loss"], rtol=1e-5)
        np.testing.assert_allclose(vs.params["dyn"]["dyn0"]["kernel"][i],
                                   s.params["dyn"]["dyn0"]["kernel"], rtol=1e-5, atol=1e-7)


def test_image_encoder_decoder_shapes():
    cfg = tiny_agent_config()
    cfg = dataclasses.replace(
        cfg, enc=dataclasses.replace(cfg.enc, depth=4, mults=(1, 2, 2), minres=4),
        dec=dataclasses.replace(cfg.dec, depth=4, mults=(1, 2, 2), minres=4))
    p, edim = nets.init_encoder(jax.random.PRNGKey(0), cfg, IMG)
    assert edim == cfg.enc.units + 4 * 4 * 8  # vector MLP first, then the CNN features
    obs = preprocess(IMG, _obs(jax.random.PRNGKey(2), IMG, (2, 5)))
    assert obs["image"].dtype == jnp.float32 and float(obs["image"].max()) <= 1.0
    # Shapes only: traced, not compiled (each op of an eager CNN compiles on its own).
    e = jax.eval_shape(lambda p, o: nets.encode(p, cfg, IMG, o), p, obs)
    assert e.shape == (2, 5, edim)
    dp = nets.init_decoder(jax.random.PRNGKey(1), cfg, IMG)
    assert dp["imgout"]["kernel"].shape[-1] == 3 and "out_vector" in dp
    lat = {"deter": jnp.zeros((2, 5, cfg.rssm.deter)),
           "stoch": jnp.zeros((2, 5, cfg.rssm.stoch, cfg.rssm.classes))}
    order = []  # the heads' order as decode returns them (a pytree's keys come back sorted)

    def decode(p, z):
        out = nets.decode(p, cfg, IMG, z)
        order.extend(out)
        return out

    dec = jax.eval_shape(decode, dp, lat)
    assert order == ["vector", "image"]
    assert dec["image"].shape == (2, 5, 16, 16, 3) and dec["vector"].shape == (2, 5, 3)
    small = Spaces((("image", (10, 10, 3), "uint8"),), True, 2)
    with pytest.raises(ValueError, match="does not reach minres"):
        nets.init_encoder(jax.random.PRNGKey(0), cfg, small)


def test_reward_head_decodes_with_its_own_bins():
    """The reward head decodes with its own bins (rewhead.bins), not the critic's."""
    cfg = tiny_agent_config(sample_mode=True)
    cfg = dataclasses.replace(cfg, rewhead=dataclasses.replace(cfg.rewhead, bins=51))
    state = A.init(jax.random.PRNGKey(0), cfg, VEC)
    assert state.params["rew"]["dist"]["out"]["kernel"].shape[-1] == 52
    carry, data = A.split_context(cfg, VEC, _batch(jax.random.PRNGKey(1), cfg, VEC))
    _, aux = jax.jit(lambda s: A.loss_fn(s.params, s.slow, s.retnorm, cfg, VEC, data, carry,
                                         jax.random.PRNGKey(2)))(state)
    assert np.isfinite(aux["metrics"]["reward_loss"])
    assert A.reward_bins(cfg).shape == (51,) and A.critic_bins(cfg).shape == (255,)


@pytest.mark.parametrize("rows", [16, 256])
def test_block_gru_paths_agree(rows, monkeypatch):
    """The per-group and the batched-einsum forms of the block-GRU step are one function."""
    cfg = agent_config("1m").rssm
    p = nets.init_rssm(jax.random.PRNGKey(0), cfg, embed_dim=64, act_dim=2)
    ks = jax.random.split(jax.random.PRNGKey(1), 3)
    deter = jax.random.normal(ks[0], (rows, cfg.deter))
    stoch = jax.nn.one_hot(jax.random.randint(ks[1], (rows, cfg.stoch), 0, cfg.classes),
                           cfg.classes)
    action = jax.random.normal(ks[2], (rows, 2))
    step = lambda: jax.jit(lambda *a: nets.gru_step(p, cfg, *a))(deter, stoch, action)  # noqa: E731
    monkeypatch.setattr(nets, "PER_GROUP_MIN_ROWS", 1)
    per_group = np.asarray(step())
    monkeypatch.setattr(nets, "PER_GROUP_MIN_ROWS", 10**9)
    einsum = np.asarray(step())
    np.testing.assert_allclose(per_group, einsum, rtol=1e-5, atol=1e-6)
    assert np.abs(per_group - np.asarray(deter)).max() > 1e-3  # the step changes deter


def test_twohot_mean_option_reaches_every_head_mean():
    from dreamerjax.algo import numerics
    from dreamerjax.config.defaults import from_dict

    config = make_config("CartPole-v1", size="1m", twohot_mean="pairsum")
    assert config.agent.twohot_mean == "pairsum"
    assert from_dict(config.to_dict()).agent.twohot_mean == "pairsum"
    assert make_config("CartPole-v1", size="1m").agent.twohot_mean == "exact"
    logits = jax.random.normal(jax.random.PRNGKey(0), (8, 255))
    bins = numerics.twohot_bins(255)
    for name, fn in numerics.TWOHOT_MEANS.items():
        cfg = dataclasses.replace(config.agent, twohot_mean=name)
        np.testing.assert_array_equal(A.twohot_expectation(cfg, logits, bins), fn(logits, bins))


@pytest.mark.parametrize("rows", [16, 256])
def test_block_gru_first_product_group_by_group_is_the_flattened_one(rows):
    """Below float32, the first block layer's product of every group's [deter block, x]:
    from PER_GROUP_MIN_ROWS rows group by group as it is (no flattened copy of all the
    groups' inputs), the same values and gradients bit for bit as grouped_matmul of the
    flattened groups."""
    g, dg, h, o = 8, 32, 48, 40
    ks = jax.random.split(jax.random.PRNGKey(3), 3)
    deter = jax.random.normal(ks[0], (rows, g * dg)).astype(jnp.bfloat16)
    x = jax.random.normal(ks[1], (rows, h)).astype(jnp.bfloat16)
    k = jax.random.normal(ks[2], (g, dg + h, o)).astype(jnp.bfloat16)

    def flattened(deter, x, k):
        xs = jnp.broadcast_to(x[:, None], (rows, g, h))
        grouped = jnp.concatenate([deter.reshape((rows, g, dg)), xs], -1)
        return nets.grouped_matmul(grouped.reshape((rows, -1)), k)

    ours = jax.jit(nets._dyn0_product)(deter, x, k)
    theirs = jax.jit(flattened)(deter, x, k)
    np.testing.assert_array_equal(np.asarray(ours, np.float32), np.asarray(theirs, np.float32))
    loss = lambda f: lambda *a: (f(*a).astype(jnp.float32) ** 2).sum()  # noqa: E731
    grads = jax.jit(jax.grad(loss(nets._dyn0_product), (0, 1, 2)))(deter, x, k)
    grads_flat = jax.jit(jax.grad(loss(flattened), (0, 1, 2)))(deter, x, k)
    for a, b in zip(grads, grads_flat, strict=True):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
