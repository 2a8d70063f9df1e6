"""The reference at e3f0224 on a JAX whose `jax.jit` takes its options by keyword only.

e3f0224 was written for jax 0.4.33 (its requirements.txt), where `jax.jit`'s options could
also be given by position, and it does so: `jax.jit(fn, in_shardings, out_shardings,
static_argnums, None, donate)` (embodied/jax/transform.py:132 @e3f0224), likewise
transform.py:56 and embodied/jax/internal.py:280 and :282. Newer JAX (0.10.2 here, on the
TPU machine) refuses them ("jit() takes 1 positional argument"), since its options became
keyword-only.

`install(jax)` replaces `jax.jit` in the reference's process with a function that passes
any such positional option on as the keyword of the same position in jax 0.4.33's
signature (`POSITIONAL`, below) and calls the real `jax.jit`. That is a rename and nothing
else: the same values reach the same parameters, so the compiled programs are those a
keyword call builds (tests/test_reference_jit_keywords.py checks the mapping, the
programs' lowered text and their outputs). Nothing in the checkout is edited; on a JAX
whose `jit` still takes positional options, `install` does nothing.
"""

from __future__ import annotations

import functools
import inspect

# jax.jit's parameters after `fun`, in their order in jax 0.4.33 (jax/_src/api.py, `jit`).
POSITIONAL = ("in_shardings", "out_shardings", "static_argnums", "static_argnames",
              "donate_argnums", "donate_argnames", "keep_unused", "device", "backend",
              "inline", "abstracted_axes")


def keyword_only(jit) -> bool:
    """Whether `jit` refuses its options by position (every parameter after `fun` is
    keyword-only)."""
    params = list(inspect.signature(jit).parameters.values())[1:]
    return bool(params) and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)


def as_keywords(args: tuple, kwargs: dict) -> dict:
    """Positional options (after `fun`) as keywords of jax 0.4.33's order, merged with the
    keywords given; the same option twice is an error, as it was in 0.4.33."""
    if len(args) > len(POSITIONAL):
        raise TypeError(f"jit() takes at most {len(POSITIONAL) + 1} positional arguments")
    named = dict(zip(POSITIONAL, args, strict=False))
    twice = sorted(set(named) & set(kwargs))
    if twice:
        raise TypeError(f"jit() got multiple values for argument {twice[0]!r}")
    return {**named, **kwargs}


def wrap(jit):
    """`jit` accepting 0.4.33's positional options."""

    @functools.wraps(jit)
    def jit_with_positional_options(fun, *args, **kwargs):
        return jit(fun, **as_keywords(args, kwargs))

    return jit_with_positional_options


def install(jax) -> bool:
    """Put the wrapper in place of `jax.jit` when this JAX needs it; True if it did."""
    if not keyword_only(jax.jit):
        return False
    jax.jit = wrap(jax.jit)
    return True
