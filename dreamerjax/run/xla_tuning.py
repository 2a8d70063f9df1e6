"""XLA:CPU options that make the update faster, applied before JAX starts its backend.

jaxlib 0.10's XLA:CPU hands reductions to YNNPACK fusions by default; for the update's
reductions (RMSNorm statistics, two-hot sums over 255 bins, per-step bias gradients in
the backward observe scan) XLA's own loop emitter is faster: one 1m CartPole update goes
from ~0.66 to ~0.61 s (results/bench/LOG.md). The option only changes which kernel runs
a reduction, not what is computed (the parity checks pass with it on and off).

XLA aborts the process on an option it does not know, so the option is added only for
the jaxlib versions it was checked with and only when XLA_FLAGS does not set it already.
The command line applies it unless told not to (--no-xla-tuning, DREAMERJAX_XLA_TUNING=0);
importing the package applies nothing.
"""

from __future__ import annotations

import importlib.metadata
import os

YNN_OPTION = "--xla_cpu_experimental_ynn_fusion_type=-reduce"
CHECKED_JAXLIB = ("0.10.",)  # versions whose XLA has the option (checked: 0.10.2)


def tuning_flags(jaxlib_version: str | None, env: dict) -> str | None:
    """The XLA_FLAGS value to use, or None to leave XLA_FLAGS as it is."""
    if jaxlib_version is None:
        return None
    if not jaxlib_version.startswith(CHECKED_JAXLIB):
        return None
    current = env.get("XLA_FLAGS", "")
    if "xla_cpu_experimental_ynn_fusion_type" in current:
        return None
    return f"{current} {YNN_OPTION}".strip()


def apply() -> bool:
    """Add the tuning option to XLA_FLAGS (before JAX initialises a backend)."""
    try:
        version = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        version = None
    flags = tuning_flags(version, dict(os.environ))
    if flags is None:
        return False
    os.environ["XLA_FLAGS"] = flags
    return True
