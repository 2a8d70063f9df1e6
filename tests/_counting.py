"""How many times an entry point calls a function of the package: the real function
wrapped, every reference a loaded dreamerjax module holds to it replaced by a wrapper that
records the call and calls through (tests/test_plan.py, tests/test_bench.py)."""

from __future__ import annotations

import functools
import sys

import pytest


def counting(monkeypatch, module, name: str) -> list:
    """Every reference to module.name that a loaded dreamerjax module holds (its own and
    those imported by name) replaced by a wrapper that records each call's first argument
    and calls the real function. Returns the list of calls."""
    real = getattr(module, name)
    calls: list = []

    @functools.wraps(real)
    def counted(*args, **kwargs):
        calls.append(args[0] if args else None)
        return real(*args, **kwargs)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("dreamerjax"):
            for attr, value in list(vars(mod).items()):
                if value is real:
                    monkeypatch.setattr(mod, attr, counted)
    return calls


def plan_calls(fn) -> tuple[int, int, object]:
    """(config/validate.validate calls, run/setup.make_setup calls, fn's value) of fn()
    with both functions counted."""
    from dreamerjax.config import validate as config_validate
    from dreamerjax.run import setup as setup_lib

    with pytest.MonkeyPatch.context() as mp:
        checks = counting(mp, config_validate, "validate")
        setups = counting(mp, setup_lib, "make_setup")
        value = fn()
    return len(checks), len(setups), value
