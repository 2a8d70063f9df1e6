"""Session-wide test settings.

One persistent XLA compilation cache for the whole session, in a temporary directory (never
the user's ~/.cache): many tests train the same tiny configuration through new jitted
functions, which the in-memory cache cannot share; with the persistent cache only the
first compiles. XDG_CACHE_HOME points there too, so that in-process and subprocess
`dreamerjax` runs with the default cache (driver.enable_compile_cache) use the same
directory. An executable loaded from the cache is the same program: no result changes.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

_root = tempfile.mkdtemp(prefix="dreamerjax-test-cache-")
atexit.register(shutil.rmtree, _root, ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = _root

import jax  # noqa: E402  (after XDG_CACHE_HOME: nothing here reads it at import)

# In this process only (not as JAX_* variables, which subprocess tests with caches of
# their own would inherit): the directory driver.enable_compile_cache would choose.
jax.config.update("jax_compilation_cache_dir", os.path.join(_root, "dreamerjax", "jax"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
# The precompile child (dreamerjax/precompile.py) halves a run's peak memory at the price of
# a second process; tests of other things run without it (tests/test_precompile.py turns it
# on where it is the subject).
os.environ.setdefault("DREAMERJAX_PRECOMPILE", "0")


@pytest.fixture(scope="session")
def reference_parity():
    """(rows, strict exit code) of every parity check on tests/data/reference, computed
    once for the parity test modules (the rows do not depend on strictness)."""
    from dreamerjax.tools.parity import run_parity

    return run_parity(Path(__file__).parent / "data" / "reference", strict=True,
                      print_table=False)
