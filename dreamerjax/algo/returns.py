"""Lambda returns for imagined trajectories and for replayed sequences.

Both are the backward recursion ret_t = interm_t + disc_t * lam * ret_{t+1}, written as a
reverse `jax.lax.scan` over time (the reference unrolls a Python loop, agent.py:304-310 and
agent.py:339-345; the arithmetic per step is the same).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

f32 = jnp.float32


def _reverse_recursion(interm: jax.Array, mult: jax.Array, last: jax.Array) -> jax.Array:
    """ret[:, t] = interm[:, t] + mult[:, t] * ret[:, t+1], seeded with `last`.

    interm, mult: `[N, T]`; last: `[N]` -> ret `[N, T]` (the seed itself is dropped).
    """

    def step(carry, xs):
        it, mu = xs
        ret = it + mu * carry
        return ret, ret

    _, rets = jax.lax.scan(step, last, (interm.T, mult.T), reverse=True)
    return rets.T


def imag_weight(con: jax.Array, discount: float) -> jax.Array:
    """Loss weight of each imagined step: cumprod(discount * con) / discount, `[N, H+1]`.

    With contdisc (the default) discount is 1 and the weight is the probability that the
    episode is still running (agent.py:300-301).
    """
    return jnp.cumprod(discount * con, 1) / discount


def lambda_return(
    rew: jax.Array, con: jax.Array, tarval: jax.Array, lam: float, discount: float
) -> jax.Array:
    """TD(lambda) return of an imagined trajectory (agent.py:304-310).

    rew, con, tarval: `[N, H+1]` (index 0 is the start state; its reward and continue
    flag are not used) -> ret `[N, H]`, bootstrapped from tarval[:, -1].
    """
    disc = con[:, 1:] * discount
    interm = rew[:, 1:] + (1 - lam) * disc * tarval[:, 1:]
    # The reference multiplies (disc * lam) * ret in this order.
    return _reverse_recursion(interm, disc * lam, tarval[:, -1])


def imagined_returns(
    rew: jax.Array, con: jax.Array, tarval: jax.Array, lam: float, contdisc: bool, horizon: int
) -> tuple[jax.Array, jax.Array]:
    """(ret `[N, H]`, weight `[N, H+1]`) with the reference's discount choice.

    contdisc: the continue head (trained on the soft label (1 - terminal)(1 - 1/horizon))
    already carries the discount, so the return uses discount 1; otherwise
    discount = 1 - 1/horizon (agent.py:300).
    """
    discount = 1 if contdisc else 1 - 1 / horizon
    return lambda_return(rew, con, tarval, lam, discount), imag_weight(con, discount)


def imagined_returns_e3f0224(
    rew: jax.Array, con: jax.Array, tarval: jax.Array, lam: float, contdisc: bool, horizon: int
) -> tuple[jax.Array, jax.Array]:
    """HEAD's (ret `[N, H]`, weight `[N, H+1]`) (agent.py:397-405, 482-490 @e3f0224): the
    same recursion as `imagined_returns`, written through terminal = 1 - con, whose
    survival 1 - (1 - con) is not con bit for bit; the weight is cumprod(disc * con) / disc
    over all H + 1 predicted continues."""
    disc = 1 if contdisc else 1 - 1 / horizon
    live = (1 - (1 - con))[:, 1:] * disc
    cont = jnp.ones_like(live) * lam  # float32 lambda; 1 - cont rounds in float32 as there
    interm = rew[:, 1:] + (1 - cont) * live * tarval[:, 1:]
    ret = _reverse_recursion(interm, live * cont, tarval[:, -1])
    return ret, imag_weight(con, disc)


def replay_return(
    reward: jax.Array,
    boot: jax.Array,
    is_terminal: jax.Array,
    is_last: jax.Array,
    lam: float,
    horizon: int,
) -> jax.Array:
    """Lambda return along replayed sequences for the replay critic (agent.py:339-345).

    reward, boot: `[B, T]` f32 (boot = imagined return of each row's start state);
    is_terminal, is_last: `[B, T]` bool -> ret `[B, T-1]`.
    Terminal steps cut the value (live = 0); episode ends (is_last) cut the lambda trace so
    the return bootstraps fully from `boot` there (cont = 0).
    """
    live = (~is_terminal).astype(f32)[:, 1:] * (1 - 1 / horizon)
    cont = (~is_last).astype(f32)[:, 1:] * lam
    interm = reward[:, 1:] + (1 - cont) * live * boot[:, 1:]
    return _reverse_recursion(interm, live * cont, boot[:, -1])
