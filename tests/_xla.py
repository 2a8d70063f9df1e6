"""The tiers' XLA build (tests/conftest.py applies it): quick code generation, and the
environment of a child that compiles as `dreamerjax` users' programs compile."""

from __future__ import annotations

import os

QUICK_CODEGEN = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def users_build_env() -> dict:
    """This process's environment with XLA_FLAGS less QUICK_CODEGEN: a child started with
    it compiles as users' programs compile, whatever TEST_XLA says."""
    flags = os.environ.get("XLA_FLAGS", "")
    for option in QUICK_CODEGEN.split():
        flags = flags.replace(option, "")
    return dict(os.environ, XLA_FLAGS=" ".join(flags.split()))
