"""Hand-worked cases for the numerical building blocks (dreamerjax.algo.numerics)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax.algo import numerics as nm

REF = Path(__file__).parent / "data" / "reference"
SMALL_BINS = jnp.array([-2.0, -1.0, 0.0, 1.0, 2.0], jnp.float32)


def _log_softmax64(logits):
    x = np.asarray(logits, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


# --------------------------------------------------------------------------- symlog


def test_symlog_symexp_values_and_inverse():
    x = jnp.array([-1e6, -3.0, -1e-3, 0.0, 1e-3, 3.0, 1e6], jnp.float32)
    np.testing.assert_allclose(nm.symlog(x), np.sign(x) * np.log1p(np.abs(x)), rtol=1e-6)
    np.testing.assert_allclose(nm.symexp(nm.symlog(x)), x, rtol=1e-5)
    assert float(nm.symlog(jnp.float32(0.0))) == 0.0
    assert float(nm.symexp(jnp.float32(0.0))) == 0.0


# --------------------------------------------------------------------------- bins


def test_twohot_bins_shape_symmetry_and_range():
    bins = np.asarray(nm.twohot_bins(255))
    assert bins.shape == (255,) and bins.dtype == np.float32
    assert bins[127] == 0.0
    assert np.array_equal(bins, -bins[::-1])
    assert np.all(np.diff(bins) > 0)
    np.testing.assert_allclose(bins[-1], np.expm1(20.0), rtol=1e-6)


def test_twohot_bins_equal_reference_bits():
    ref = np.load(REF / "twohot.npz")["bins_eager"]
    ours = np.asarray(nm.twohot_bins(255))
    assert np.array_equal(ours.view(np.int32), ref.view(np.int32))


def test_twohot_bins_usable_inside_jit():
    out = jax.jit(lambda x: x + nm.twohot_bins(255))(jnp.float32(0.0))
    assert np.array_equal(np.asarray(out), np.asarray(nm.twohot_bins(255)))


def test_twohot_bins_reject_even_count():
    with pytest.raises(ValueError):
        nm.twohot_bins(256)


# --------------------------------------------------------------------------- two-hot


def test_twohot_log_prob_on_a_bin():
    logits = jnp.array([0.3, -1.0, 2.0, 0.5, -0.2], jnp.float32)
    ls = _log_softmax64(logits)
    out = nm.twohot_log_prob(logits, jnp.float32(1.0), SMALL_BINS)
    np.testing.assert_allclose(out, ls[3], rtol=1e-6)


def test_twohot_log_prob_between_two_bins():
    logits = jnp.array([0.3, -1.0, 2.0, 0.5, -0.2], jnp.float32)
    ls = _log_softmax64(logits)
    # 0.25 lies between bins 0 (index 2) and 1 (index 3): weights 0.75 and 0.25.
    out = nm.twohot_log_prob(logits, jnp.float32(0.25), SMALL_BINS)
    np.testing.assert_allclose(out, 0.75 * ls[2] + 0.25 * ls[3], rtol=1e-6)
    # -1.5 between -2 and -1: equal weights.
    out = nm.twohot_log_prob(logits, jnp.float32(-1.5), SMALL_BINS)
    np.testing.assert_allclose(out, 0.5 * ls[0] + 0.5 * ls[1], rtol=1e-6)


def test_twohot_log_prob_beyond_the_outer_bins_clips():
    logits = jnp.array([0.3, -1.0, 2.0, 0.5, -0.2], jnp.float32)
    ls = _log_softmax64(logits)
    out = nm.twohot_log_prob(jnp.stack([logits, logits]), jnp.array([7.0, -9.0]), SMALL_BINS)
    np.testing.assert_allclose(out, [ls[4], ls[0]], rtol=1e-6)


def test_twohot_log_prob_batched_shapes():
    logits = jax.random.normal(jax.random.PRNGKey(0), (3, 4, 255))
    x = jax.random.normal(jax.random.PRNGKey(1), (3, 4)) * 100
    assert nm.twohot_log_prob(logits, x, nm.twohot_bins()).shape == (3, 4)


def test_twohot_mean_exactly_zero_for_mirror_logits_under_jit():
    bins = nm.twohot_bins()
    half = jax.random.normal(jax.random.PRNGKey(0), (64, 128)) * 3.0
    mirror = jnp.concatenate([half, half[:, :-1][:, ::-1]], -1)
    assert bool(jnp.all(mirror == mirror[:, ::-1]))
    logits = jnp.concatenate([mirror, jnp.zeros((1, 255))], 0)
    mean = jax.jit(nm.twohot_mean)(logits, bins)
    assert np.all(np.asarray(mean) == 0.0)
    # Also inside a bigger fused graph and under vmap.
    mean2 = jax.jit(jax.vmap(lambda lg: nm.twohot_mean(lg * 1.0 + 0.0, bins) * 2.0))(logits)
    assert np.all(np.asarray(mean2) == 0.0)


def test_twohot_mean_exactly_zero_for_mirror_logits_at_training_shapes():
    # The imagined critic values: [1024 starts, 16 steps, 255 bins], next to other work
    # in one program; one row in 8 mirror-symmetric.
    bins = nm.twohot_bins()
    half = jax.random.normal(jax.random.PRNGKey(1), (1024, 16, 128)) * 3.0
    mirror = jnp.concatenate([half, half[..., :-1][..., ::-1]], -1)
    noise = jax.random.normal(jax.random.PRNGKey(2), mirror.shape)
    sym = (jnp.arange(1024) % 8 == 0)[:, None, None]
    logits = jnp.where(sym, mirror, mirror + noise)

    @jax.jit
    def f(lg):
        return nm.twohot_mean(lg, bins), jax.nn.logsumexp(lg, -1)

    mean = np.asarray(f(logits)[0])
    assert np.all(mean[::8] == 0.0)
    assert np.all(mean[1::8] != 0.0)


def test_twohot_mean_gradient_is_the_expectation_gradient():
    bins = nm.twohot_bins()
    logits = jax.random.normal(jax.random.PRNGKey(4), (6, 255)) * 2.0
    logits = logits.at[0].set(0.0)  # all pairs equal: the select must not zero the grad
    g_mean = jax.grad(lambda lg: nm.twohot_mean(lg, bins / 1e6).sum())(logits)
    g_naive = jax.grad(lambda lg: nm.twohot_mode(lg, bins / 1e6).sum())(logits)
    np.testing.assert_allclose(g_mean, g_naive, rtol=1e-4, atol=1e-6)
    assert float(jnp.abs(g_mean[0]).max()) > 0.0


def test_twohot_mean_matches_float64_expectation():
    bins = nm.twohot_bins()
    logits = jax.random.normal(jax.random.PRNGKey(3), (16, 255)) * 2.0
    mean = np.asarray(jax.jit(nm.twohot_mean)(logits, bins))
    p = np.exp(_log_softmax64(logits))
    b = np.asarray(bins, np.float64)
    exact = (p * b).sum(-1)
    mass = (p * np.abs(b)).sum(-1)
    assert np.all(np.abs(mean - exact) <= 4 * np.finfo(np.float32).eps * mass)


def _mirror_logits_with_moved_centre(rows: int, seed: int = 0) -> np.ndarray:
    """Bitwise mirror-symmetric outer logits, central bins moved: a trained head's shape."""
    rng = np.random.default_rng(seed)
    half = (rng.normal(size=(rows, 127)) - 3).astype(np.float32)
    logits = np.concatenate([half[:, ::-1], np.zeros((rows, 1), np.float32), half], 1)
    logits[:, 120:135] += (rng.normal(size=(rows, 15)) * 2).astype(np.float32)
    return logits


def test_twohot_mean_pairsum_is_the_expectation_op_by_op():
    # Eager (one op at a time, no fusion) the reference's summation order is exact too.
    bins = nm.twohot_bins()
    logits = _mirror_logits_with_moved_centre(256)
    p = np.exp(_log_softmax64(jnp.asarray(logits)))
    b = np.asarray(bins, np.float64)
    mass = (p * np.abs(b)).sum(-1)
    eager = np.asarray(nm.twohot_mean_pairsum(jnp.asarray(logits), bins))
    assert np.all(np.abs(eager - (p * b).sum(-1)) <= 4 * np.finfo(np.float32).eps * mass)
    assert nm.TWOHOT_MEANS["pairsum"] is nm.twohot_mean_pairsum
    assert nm.TWOHOT_MEANS["exact"] is nm.twohot_mean
    with pytest.raises(ValueError, match="odd number of bins"):
        nm.twohot_mean_pairsum(jnp.zeros((4, 254)), jnp.zeros((254,)))


def test_twohot_mean_exact_under_jit_where_the_pairsum_may_not_be():
    # The exact form stays within float32 rounding of the true mean inside a compiled
    # program; the pairsum's error there is whatever XLA's contraction makes of it (D1),
    # never smaller than the exact form's.
    bins = nm.twohot_bins()
    logits = _mirror_logits_with_moved_centre(4096, seed=1)
    p = np.exp(_log_softmax64(jnp.asarray(logits)))
    truth = (p * np.asarray(bins, np.float64)).sum(-1)
    exact = np.asarray(jax.jit(nm.twohot_mean)(logits, bins))
    pairsum = np.asarray(jax.jit(nm.twohot_mean_pairsum)(logits, bins))
    assert np.abs(exact - truth).max() < 1e-5
    assert np.abs(pairsum - truth).max() >= np.abs(exact - truth).max()


def test_twohot_mean_of_peaked_logits_is_the_bin():
    bins = nm.twohot_bins()
    logits = jnp.full((255,), -1e4).at[130].set(0.0)
    assert float(nm.twohot_mean(logits, bins)) == float(bins[130])
    assert float(nm.twohot_mode(logits, bins)) == float(bins[130])


# --------------------------------------------------------------------------- one-hot


def test_unimix_probabilities_sum_to_one_and_floor():
    logits = jnp.array([[10.0, -10.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0]])
    mixed = nm.unimix_logits(logits, 0.01)
    probs = np.exp(np.asarray(mixed, np.float64))
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
    assert probs.min() >= 0.01 / 4 * (1 - 1e-5)
    np.testing.assert_allclose(probs[1], 0.25, rtol=1e-6)
    assert nm.unimix_logits(logits, 0.0) is logits


def test_onehot_sample_is_onehot_with_straight_through_gradient():
    logits = jnp.array([[0.5, -0.3, 1.2], [2.0, 0.0, -1.0]])
    w = jnp.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]])
    key = jax.random.PRNGKey(7)
    sample = nm.onehot_sample(key, logits)
    assert np.all(np.asarray(sample).sum(-1) == 1.0)
    assert set(np.unique(np.asarray(sample))) <= {0.0, 1.0}
    g_sample = jax.grad(lambda lg: jnp.sum(w * nm.onehot_sample(key, lg)))(logits)
    g_probs = jax.grad(lambda lg: jnp.sum(w * jax.nn.softmax(lg, -1)))(logits)
    np.testing.assert_allclose(g_sample, g_probs, rtol=1e-6, atol=1e-7)


def test_onehot_sample_frequencies_follow_probs():
    logits = jnp.log(jnp.array([0.2, 0.5, 0.3]))
    keys = jax.random.split(jax.random.PRNGKey(0), 4000)
    samples = jax.vmap(lambda k: nm.onehot_sample(k, logits))(keys)
    np.testing.assert_allclose(np.asarray(samples).mean(0), [0.2, 0.5, 0.3], atol=0.03)


def test_onehot_mode_is_argmax_with_probs_gradient():
    logits = jnp.array([0.5, 2.0, -1.0])
    assert np.array_equal(np.asarray(nm.onehot_mode(logits)), [0.0, 1.0, 0.0])
    w = jnp.array([1.0, -2.0, 0.5])
    g = jax.grad(lambda lg: jnp.sum(w * nm.onehot_mode(lg)))(logits)
    g_probs = jax.grad(lambda lg: jnp.sum(w * jax.nn.softmax(lg)))(logits)
    np.testing.assert_allclose(g, g_probs, rtol=1e-6)


def test_onehot_log_prob_entropy_and_kl():
    logits = jnp.array([[0.5, -0.3, 1.2, 0.0], [3.0, -2.0, 0.1, 0.4]])
    other = jnp.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, -1.0, 0.4]])
    ls = _log_softmax64(logits)
    p = np.exp(ls)
    value = jax.nn.one_hot(jnp.array([2, 1]), 4)
    np.testing.assert_allclose(nm.onehot_log_prob(logits, value), [ls[0, 2], ls[1, 1]],
                               rtol=1e-6)
    np.testing.assert_allclose(nm.onehot_entropy(logits), -(p * ls).sum(-1), rtol=1e-6)
    lq = _log_softmax64(other)
    np.testing.assert_allclose(nm.categorical_kl(logits, other), (p * (ls - lq)).sum(-1),
                               rtol=1e-5)
    np.testing.assert_allclose(nm.categorical_kl(logits, logits), 0.0, atol=1e-7)
    # Uniform logits: entropy log(C).
    np.testing.assert_allclose(nm.onehot_entropy(jnp.zeros(4)), np.log(4.0), rtol=1e-6)


def test_onehot_log_prob_has_no_gradient_into_the_value():
    logits = jnp.array([0.5, -0.3, 1.2])
    g = jax.grad(lambda v: nm.onehot_log_prob(logits, v))(jnp.array([0.0, 1.0, 0.0]))
    assert np.all(np.asarray(g) == 0.0)


# --------------------------------------------------------------------------- Bernoulli


def test_bernoulli_soft_label_log_prob():
    logit = jnp.array([-3.0, -0.5, 0.0, 1.0, 4.0])
    x = jnp.array([0.0, 0.3, 1.0, 1.0 - 1 / 333, 0.5])
    p = 1 / (1 + np.exp(-np.asarray(logit, np.float64)))
    want = np.asarray(x) * np.log(p) + (1 - np.asarray(x)) * np.log1p(-p)
    np.testing.assert_allclose(nm.bernoulli_log_prob(logit, x), want, rtol=1e-6)
    np.testing.assert_allclose(nm.bernoulli_mean(logit), p, rtol=1e-6)
    # Hard labels at infinite logits stay finite (tfp's multiply_no_nan).
    assert float(nm.bernoulli_log_prob(jnp.float32(-jnp.inf), jnp.float32(0.0))) == 0.0


# --------------------------------------------------------------------------- Normal


def test_normal_params_bounds_and_log_prob():
    out = jnp.array([[-5.0, 0.0, 5.0]])
    std_raw = jnp.array([[-50.0, 0.0, 50.0]])
    mean, std = nm.normal_params(out, std_raw, 0.1, 1.0)
    np.testing.assert_allclose(mean, np.tanh([[-5.0, 0.0, 5.0]]), rtol=1e-6)
    np.testing.assert_allclose(std[0, 0], 0.1, rtol=1e-5)
    np.testing.assert_allclose(std[0, 1], 0.9 / (1 + np.exp(-2.0)) + 0.1, rtol=1e-6)
    np.testing.assert_allclose(std[0, 2], 1.0, rtol=1e-6)
    x = jnp.array([[0.1, -0.2, 0.9]])
    m64, s64, x64 = (np.asarray(a, np.float64) for a in (mean, std, x))
    want = (-0.5 * ((x64 - m64) / s64) ** 2 - np.log(s64) - 0.5 * np.log(2 * np.pi)).sum(-1)
    np.testing.assert_allclose(nm.normal_log_prob(mean, std, x), want, rtol=1e-5)
    ent = (0.5 + 0.5 * np.log(2 * np.pi) + np.log(s64)).sum(-1)
    np.testing.assert_allclose(nm.normal_entropy(std), ent, rtol=1e-6)
    lo, hi = nm.normal_minmax_entropy(3, 0.1, 1.0)
    np.testing.assert_allclose([lo, hi], 3 * (0.5 + 0.5 * np.log(2 * np.pi) + np.log([0.1, 1.0])),
                               rtol=1e-6)
    s = nm.normal_sample(jax.random.PRNGKey(0), mean, std)
    assert s.shape == mean.shape


# --------------------------------------------------------------------------- init, norm


@pytest.mark.parametrize("shape,fan", [((5,), 1), ((3, 4), 3), ((8, 16, 4), 128),
                                       ((3, 3, 2, 8), 18), ((), 1)])
def test_init_fan_in(shape, fan):
    assert nm.init_fan_in(shape) == fan


def test_truncated_normal_init_bounds_scale_and_zero_outscale():
    key = jax.random.PRNGKey(0)
    w = np.asarray(nm.truncated_normal_init(key, (256, 512), None, 1.0))
    bound = 2 * 1.1368 / np.sqrt(256)
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    # Truncated N(0,1) on [-2, 2] has std 0.8796; 1.1368 undoes that.
    np.testing.assert_allclose(w.std() * np.sqrt(256), 1.0, rtol=0.02)
    assert np.all(np.asarray(nm.truncated_normal_init(key, (4, 4), 4, 0.0)) == 0.0)
    scaled = nm.truncated_normal_init(key, (4, 4), 4, 0.5)
    np.testing.assert_allclose(scaled, 0.5 * nm.truncated_normal_init(key, (4, 4), 4, 1.0))


def test_rms_norm_hand_example():
    x = jnp.array([[3.0, 4.0]])
    scale = jnp.array([1.0, 2.0])
    rms = np.sqrt((9 + 16) / 2 + 1e-4)
    np.testing.assert_allclose(nm.rms_norm(x, scale), [[3 / rms, 8 / rms]], rtol=1e-6)


def test_tensorstats():
    stats = nm.tensorstats(jnp.array([-1.0, 1.0, 3.0]), "adv")
    assert set(stats) == {"adv/mean", "adv/std", "adv/mag", "adv/min", "adv/max"}
    np.testing.assert_allclose(stats["adv/mag"], 5 / 3, rtol=1e-6)
    assert float(stats["adv/min"]) == -1.0 and float(stats["adv/max"]) == 3.0
