"""benchmarks/reference_run/jit_keywords.py: the reference's positional `jax.jit` options
passed as keywords on a JAX that takes keywords only, and nothing else changed."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

HERE = Path(__file__).resolve().parents[1] / "benchmarks" / "reference_run"


def _module():
    spec = importlib.util.spec_from_file_location("jit_keywords", HERE / "jit_keywords.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


jk = _module()


def test_the_options_the_reference_passes_are_parameters_of_this_jit():
    # At most five options by position (transform.py:132 @e3f0224); later JAX dropped
    # abstracted_axes, which the reference never passes.
    params = inspect.signature(jax.jit).parameters
    missing = [name for name in jk.POSITIONAL[:5] if name not in params]
    assert not missing, missing


def test_the_reference_call_forms_map_to_their_parameters():
    # transform.py:132 @e3f0224: jit(fn, in_shardings, out_shardings, static_argnums,
    # None, donate); transform.py:56: five; internal.py:280: three.
    assert jk.as_keywords(("i", "o", (1,), None, (0,)), {}) == {
        "in_shardings": "i", "out_shardings": "o", "static_argnums": (1,),
        "static_argnames": None, "donate_argnums": (0,)}
    assert jk.as_keywords((("a",), "m"), {}) == {"in_shardings": ("a",), "out_shardings": "m"}
    assert jk.as_keywords((), {"static_argnums": 2}) == {"static_argnums": 2}


def test_an_option_given_twice_is_refused():
    with pytest.raises(TypeError, match="multiple values for argument 'static_argnums'"):
        jk.as_keywords((None, None, (1,)), {"static_argnums": (1,)})
    with pytest.raises(TypeError, match="at most 12 positional"):
        jk.as_keywords(tuple(range(12)), {})


def test_positional_call_builds_the_keyword_call_s_program():
    def step(params, scale, x):
        return jax.tree.map(lambda p: p * scale + jnp.tanh(x).sum(), params), x.mean()

    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    x = jnp.linspace(-1, 1, 8)
    cpu = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    shardings = ({"w": cpu, "b": cpu}, cpu)  # the static argument has none
    positional = jk.wrap(jax.jit)(step, shardings, None, (1,), None, (0,))
    keyword = jax.jit(step, in_shardings=shardings, out_shardings=None, static_argnums=(1,),
                      static_argnames=None, donate_argnums=(0,))
    lowered = [f.lower(params, 2.0, x).as_text() for f in (positional, keyword)]
    assert lowered[0] == lowered[1]
    out_p = positional(jax.tree.map(jnp.copy, params), 2.0, x)
    out_k = keyword(jax.tree.map(jnp.copy, params), 2.0, x)
    for a, b in zip(jax.tree.leaves(out_p), jax.tree.leaves(out_k), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_install_only_where_jit_refuses_positional_options(monkeypatch):
    class FakeJax:
        @staticmethod
        def jit(fun, in_shardings=None, out_shardings=None):  # 0.4.x style
            return fun

    assert not jk.install(FakeJax)
    assert FakeJax.jit.__name__ == "jit"
    if jk.keyword_only(jax.jit):  # this JAX: keyword-only options (0.7 and newer)
        monkeypatch.setattr(jax, "jit", jax.jit)
        assert jk.install(jax)
        assert jax.jit(lambda a: a + 1, None, None)(jnp.ones(2)).tolist() == [2.0, 2.0]
