"""Replay selectors (replay.fracs): the probabilities of the reference's own Uniform /
Prioritized / Recency / Mixture over a scripted history, reproduced from our state."""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _runs import SMALL_RUN

from dreamerjax.config import keys as C
from dreamerjax.config import resolve as R
from dreamerjax.config.validate import validate
from dreamerjax.data import replay as rp
from dreamerjax.run import driver

DATA = Path(__file__).parent / "data" / "reference_replay"


def _example():
    return dict(obs=np.zeros(2, np.float32), action=np.int32(0), reward=np.float32(0),
                is_first=False, is_last=False, is_terminal=False,
                deter=np.zeros(1, np.float32), stoch=np.zeros(1, np.int32))


def _rows(num_envs):
    return {k: np.stack([np.asarray(v)] * num_envs) for k, v in _example().items()}


def _selector(d, name):
    def get(k):
        return d[f"config/{name}/{k}"].item()
    return rp.Selector(
        uniform=get("fracs/uniform"), priority=get("fracs/priority"),
        recency=get("fracs/recency"), exponent=get("prio/exponent"),
        maxfrac=get("prio/maxfrac"), initial=get("prio/initial"),
        zero_on_sample=bool(get("prio/zero_on_sample")), recexp=get("recexp"))


_add = jax.jit(rp.replay_add)
_probs = jax.jit(rp.replay_probs)
_set = jax.jit(rp.replay_set_priority)
_zero = jax.jit(rp._zero_item)


def _runs(version):
    d = np.load(DATA / f"selectors_{version}.npz")
    tags = sorted({k.split("/")[0] for k in d if k.endswith("/probs")})
    return [(version, tag) for tag in tags]


@pytest.mark.parametrize("version,tag", _runs("29eb964") + _runs("e3f0224"))
def test_probabilities_match_the_reference_selectors(version, tag):
    d = np.load(DATA / f"selectors_{version}.npz")
    E, L, cap = (int(d[f"meta/{k}"]) for k in ("envs", "length", "cap_rows"))
    name = tag.removesuffix("_updates")
    sel = _selector(d, name)
    state = rp.replay_init(E, cap, _example(), length=L, selector=sel)
    events, values = d[f"{tag}/events"], d[f"{tag}/values"]
    checks = dict(zip(d[f"{tag}/check_events"].tolist(), d[f"{tag}/probs"], strict=True))
    compared = 0
    for i in range(len(events) + 1):
        if i in checks:
            got = np.asarray(_probs(state))
            np.testing.assert_allclose(got, checks[i], rtol=2e-5, atol=1e-7,
                                       err_msg=f"{tag} after event {i}")
            compared += 1
        if i == len(events):
            break
        kind, a, b, c = events[i].tolist()
        if kind == 0:
            state = _add(state, _rows(E))
        elif kind == 1 and c and sel.zero_on_sample:
            state = _zero(state, jnp.int32(a), jnp.int32(b), jnp.bool_(True))
        elif kind == 2:
            state = _set(state, jnp.array([a]), jnp.array([b]),
                         jnp.array([values[c]], jnp.float32))
    assert compared == len(checks) > 5


def test_uniform_only_selector_is_the_uniform_replay():
    state = rp.replay_init(2, 10, _example(), length=4, selector=rp.Selector())
    plain = rp.replay_init(2, 10, _example(), length=4)
    assert state.prio is None and state.selector is None
    assert jax.tree.structure(state) == jax.tree.structure(plain)


def test_bad_fracs_are_refused():
    with pytest.raises(ValueError, match="sum to 1"):
        rp.Selector(uniform=0.5, priority=0.3)
    with pytest.raises(ValueError, match="maxfrac"):
        rp.Selector(uniform=0.0, priority=1.0, maxfrac=1.5)


def test_mixture_draws_follow_the_probabilities():
    """Draws without zero_on_sample: the empirical frequencies of the items match
    replay_probs (with the online queue consumed first)."""
    sel = rp.Selector(uniform=0.5, priority=0.3, recency=0.2, initial=1.0,
                      zero_on_sample=False)
    state = rp.replay_init(2, 10, _example(), length=4, selector=sel)
    for _ in range(14):
        state = _add(state, _rows(2))
    state = _set(state, jnp.array([0, 1, 1]), jnp.array([6, 8, 13]),
                 jnp.array([5.0, 0.0, 9.0]))
    state = state.replace(online_head=jnp.int32(10 ** 6))  # queue consumed
    want = np.asarray(rp.replay_probs(state))
    sample = jax.jit(lambda s, k: rp.replay_sample(s, k, 4096)[2])
    idx = sample(state, jax.random.PRNGKey(0))
    freq = np.zeros_like(want)
    np.add.at(freq, (np.asarray(idx.env), np.asarray(idx.start) % 10), 1.0 / 4096)
    assert abs(want.sum() - 1) < 1e-5
    np.testing.assert_allclose(freq, want, atol=4 * math.sqrt(0.25 / 4096))


def test_zero_on_sample_zeroes_priority_draws_within_a_batch():
    sel = rp.Selector(uniform=0.0, priority=1.0, recency=0.0, initial=math.inf)
    state = rp.replay_init(1, 40, _example(), length=4, selector=sel)
    for _ in range(40):
        state = _add(state, _rows(1))
    state = state.replace(online_head=jnp.int32(10 ** 6))
    state, _, idx = jax.jit(lambda s, k: rp.replay_sample(s, k, 8))(
        state, jax.random.PRNGKey(1))
    prio = np.asarray(state.prio[0])
    for s in np.asarray(idx.start):
        assert (prio[s:s + 4] == 0).all()
    # Infinite items are drawn before any finite one: 8 draws touch 8 distinct items
    # whose windows each had a row at inf.
    assert np.isinf(prio).sum() >= 40 - 8 * 4


# ----------------------------------------------------------------------------- config


MIX = ["replay.fracs.uniform=0.5", "replay.fracs.priority=0.3", "replay.fracs.recency=0.2"]


@pytest.mark.parametrize("reference, sets", [
    ("e3f0224", [*MIX, "replay.recexp=0.5", "replay.prio.exponent=0.6",
                 "replay.prio.maxfrac=0.2", "replay.prio.initial=2",
                 "replay.prio.zero_on_sample=False"]),
    ("29eb964", ["replay.fracs.uniform=0.5", "replay.fracs.recency=0.5",
                 "replay.recexp=2"]),
    ("29eb964", [*MIX, "replay.priosignal=td"]),
])
def test_the_selector_keys_are_accepted_at_their_version(reference, sets):
    config = R.make_config("CartPole-v1", sets=sets, reference=reference)
    validate(config)
    sel = rp.selector_from_run(config.run)
    assert sel is not None and sel.recency > 0
    assert rp.writes_priorities(rp.replay_init(2, 10, _example(), 4, sel), reference) == (
        reference == "29eb964" and sel.priority > 0)
    assert rp.selector_from_run(R.make_config("CartPole-v1", reference=reference).run) is None


@pytest.mark.parametrize("reference, sets, message", [
    ("e3f0224", ["replay.fracs.uniform=0.5"], "replay.fracs: uniform=0.5, priority=0.0"),
    ("e3f0224", [*MIX, "replay.prio.maxfrac=1.5"], "replay.prio.maxfrac: 1.5; must be in"),
    ("e3f0224", [*MIX, "replay.prio.initial=-1"], "replay.prio.initial: -1.0; must be >= 0"),
    ("e3f0224", ["replay.priosignal=td"], "only 'model' is implemented"),
    ("29eb964", ["replay.priosignal=loss"], "choose one of model, td, all"),
])
def test_bad_selector_values_are_refused_naming_the_key(reference, sets, message):
    with pytest.raises(C.ConfigError, match=message.replace("(", r"\(")):
        validate(R.make_config("CartPole-v1", sets=sets, reference=reference))


@pytest.mark.slow  # compiles a tiny run
@pytest.mark.parametrize("reference, sets", [
    ("e3f0224", MIX),
    ("29eb964", [*MIX, "replay.priosignal=all"]),  # priorities written back
])
def test_a_tiny_run_with_the_mixture_trains(tmp_path, reference, sets):
    cfg = R.make_config("CartPole-v1", tiny=True, sets=sets, reference=reference,
                        **{**SMALL_RUN, "steps": 240})
    res = driver.train(cfg, (0,), str(tmp_path / "run"), progress=False, tensorboard=False,
                       report=False)
    trained = [r for r in res.records if r["updates"] > 0]
    assert trained, res.records
    assert all(np.isfinite(r["train"]["opt_loss"]) for r in trained)


def test_priorities_written_back_land_on_the_trained_rows():
    """replay_prioritize: priority [B, T] of rows start + K .. start + L - 1; rows the
    ring no longer holds are left alone."""
    sel = rp.Selector(uniform=0.0, priority=1.0, initial=7.0)
    state = rp.replay_init(1, 10, _example(), length=4, selector=sel)
    for _ in range(13):  # rows 0..12; the ring holds rows 3..12
        state = _add(state, _rows(1))
    index = rp.ReplayIndex(env=jnp.array([0, 0], jnp.int32), start=jnp.array([1, 8]))
    state = rp.replay_prioritize(state, index, jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    prio = np.asarray(state.prio[0])
    # Window 1: rows 2 (gone), 3, 4 -> slots 3, 4; window 8: rows 9, 10, 11.
    want = {3: 2.0, 4: 3.0, 9: 4.0, 0: 5.0, 1: 6.0}  # row r at slot r % 10
    for slot in range(10):
        assert prio[slot] == want.get(slot, 7.0), slot
