"""Lambda returns (dreamerjax.algo.returns), worked out by hand and against the reference."""

from pathlib import Path

import jax.numpy as jnp
import numpy as np

from dreamerjax.algo import returns
from dreamerjax.tools.parity import fixtures

REF = Path(__file__).parent / "data" / "reference"


def _traj():
    # One trajectory, H = 3: index 0 is the start state.
    rew = jnp.array([[9.0, 1.0, 2.0, 3.0]])
    con = jnp.array([[0.0, 1.0, 0.5, 1.0]])
    val = jnp.array([[7.0, 10.0, 20.0, 30.0]])
    return rew, con, val


def test_lambda_one_is_discounted_sum_with_bootstrap():
    rew, con, val = _traj()
    ret = returns.lambda_return(rew, con, val, 1.0, 1.0)
    # ret2 = 3 + 1*30; ret1 = 2 + 0.5*33; ret0 = 1 + 1*18.5
    np.testing.assert_allclose(ret, [[19.5, 18.5, 33.0]], rtol=1e-6)


def test_lambda_zero_is_one_step_td():
    rew, con, val = _traj()
    ret = returns.lambda_return(rew, con, val, 0.0, 1.0)
    np.testing.assert_allclose(ret, [[1 + 10.0, 2 + 0.5 * 20, 3 + 30.0]], rtol=1e-6)


def test_mixed_lambda_and_discount():
    rew, con, val = _traj()
    lam, disc = 0.5, 0.9
    ret = np.asarray(returns.lambda_return(rew, con, val, lam, disc))
    c = np.array([1.0, 0.5, 1.0]) * disc
    r = np.array([1.0, 2.0, 3.0])
    v = np.array([10.0, 20.0, 30.0])  # values of the next states; 30 also bootstraps
    want = np.zeros(3)
    nxt = 30.0
    for t in reversed(range(3)):
        want[t] = r[t] + c[t] * ((1 - lam) * v[t] + lam * nxt)
        nxt = want[t]
    np.testing.assert_allclose(ret[0], want, rtol=1e-6)


def test_contdisc_choice_and_weight():
    rew, con, val = _traj()
    ret, weight = returns.imagined_returns(rew, con, val, 0.95, True, 333)
    np.testing.assert_allclose(ret, returns.lambda_return(rew, con, val, 0.95, 1.0))
    np.testing.assert_allclose(weight, [[0.0, 0.0, 0.0, 0.0]])  # con[0] = 0 zeroes the path
    con2 = con.at[0, 0].set(1.0)
    _, weight = returns.imagined_returns(rew, con2, val, 0.95, False, 333)
    g = 1 - 1 / 333
    np.testing.assert_allclose(weight, [[1.0, g, 0.5 * g * g, 0.5 * g**3]], rtol=1e-6)


def test_replay_return_terminal_and_truncation():
    g = 1 - 1 / 333
    reward = jnp.array([[0.0, 1.0, 1.0, 1.0]])
    boot = jnp.array([[5.0, 6.0, 7.0, 8.0]])
    term = jnp.array([[False, False, True, False]])
    last = jnp.array([[False, False, True, False]])
    ret = np.asarray(returns.replay_return(reward, boot, term, last, 0.95, 333))
    # t=2 (row 3): live 1, cont 0.95: 1 + 0.05*g*8 + 0.95*g*8
    r2 = 1 + 0.05 * g * 8 + g * 0.95 * 8
    # t=1 (row 2, terminal): live 0, cont 0 -> just the reward.
    r1 = 1.0
    r0 = 1 + 0.05 * g * 6 + g * 0.95 * r1
    np.testing.assert_allclose(ret[0], [r0, r1, r2], rtol=1e-6)
    # Truncation (last, not terminal): bootstrap fully from boot at that row.
    ret = np.asarray(returns.replay_return(reward, boot, term & False, last, 0.95, 333))
    np.testing.assert_allclose(ret[0, 1], 1 + g * 7, rtol=1e-6)


def test_returns_fixture_matches_reference():
    rows = list(fixtures.check_returns(REF / "lambda_returns.npz"))
    assert len(rows) == 7
    bad = [r for r in rows if not r.passed]
    assert not bad, bad
