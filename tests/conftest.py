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
# The command line's precompile child (dreamerjax/run/precompile.py) halves a run's peak
# memory at the price of a second process; the CLI subprocesses of tests of other things run
# without it (the CLI reads this convenience variable; tests/test_precompile.py runs the
# path users run). Library calls (driver.train) run without it unless asked.
os.environ.setdefault("DREAMERJAX_PRECOMPILE", "0")

# The quick tier (`make test-fast`, `pytest -m fast`): units, contracts, parity with the
# reference fixtures and one tiny end-to-end run, for the edit-test loop. The default tier
# (`make test`) runs these and everything else not marked slow.
FAST_MODULES = {
    "test_layers.py", "test_numerics.py", "test_normalize.py", "test_returns.py",
    "test_optim.py", "test_schedule.py", "test_replay.py", "test_config.py",
    "test_config_env.py", "test_records.py", "test_summary.py", "test_merge.py",
    "test_xla_tuning.py", "test_parity_ae.py", "test_parity_agent.py",
    "test_reference_ticks.py", "test_checkpoint.py", "test_cli.py",
}
FAST_TESTS = {  # the one tiny end-to-end run
    "test_driver.py::test_checkpoint_every_zero_trains_to_the_end_without_checkpoints",
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in FAST_MODULES or f"{item.path.name}::{item.name}" in FAST_TESTS:
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="session")
def reference_parity():
    """(rows, strict exit code) of every parity check on tests/data/reference, computed
    once for the parity test modules (the rows do not depend on strictness)."""
    from dreamerjax.tools.parity import run_parity

    return run_parity(Path(__file__).parent / "data" / "reference", strict=True,
                      print_table=False)
