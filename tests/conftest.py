"""Session-wide test settings.

One persistent XLA compilation cache for the whole session, in a temporary directory (never
the user's ~/.cache): many tests train the same small configuration (tests/_runs.py)
through new jitted functions, which the in-memory cache cannot share; with the persistent
cache only the first compiles. XDG_CACHE_HOME points there too, so that in-process and
subprocess `dreamerjax` runs with the default cache (precompile.enable_compile_cache) use the
same directory. An executable loaded from the cache is the same program: no result changes.

`make test` runs the session on two pytest-xdist workers (one per core of the 2-core
machine): compiling is single-threaded, so two tests compile at once. The workers share
the one cache (the controller makes it; the workers inherit its path), each test module
runs whole on one worker (`--dist loadfile`: its module-scoped runs are made once; modules
that train the same programs run as one unit, SHARED_PROGRAMS), and the slowest start first.
"""

import atexit
import os
import shutil
import tempfile

import pytest

_SHARED = "DREAMERJAX_TEST_CACHE_ROOT"  # set by the controller, read by xdist's workers
if _SHARED in os.environ:
    _root = os.environ[_SHARED]
else:
    _root = os.environ[_SHARED] = tempfile.mkdtemp(prefix="dreamerjax-test-cache-")
    atexit.register(shutil.rmtree, _root, ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = _root

# XLA options, before JAX starts its backend; subprocesses inherit XLA_FLAGS, so a test's
# run and a CLI child's run of the same configuration share one compiled program (the
# cache key includes XLA_FLAGS).
# 1. Quick code generation: compiling is most of the tier's CPU time (its programs run for
#    seconds, compiling them takes minutes), so the tier has LLVM optimise less (level 0,
#    its expensive passes off; on the jaxlib versions checked, fusions by XLA:CPU's older
#    elemental emitters: tests/_xla.py). The machine code is less tuned, so float32 results
#    may differ from the default build's in the last bits, as they may between two CPUs.
#    Measured (docs/testing.md): `dreamerjax parity --strict tests/data/reference` passes
#    every row with and without it, on 46 % less CPU with the LLVM options alone.
#    Contracts that compare two runs compare two runs of the same build. TEST_XLA=default
#    runs the tier with XLA's defaults (what `dreamerjax` users run); `make test-slow`
#    (learning checks) does.
# 2. The option the command line applies (run/xla_tuning.py), so that the library tests
#    compile the programs `dreamerjax train` children compile.
from _xla import QUICK_CODEGEN  # noqa: E402

from dreamerjax.run import xla_tuning  # noqa: E402  (imports no JAX)

if os.environ.get("TEST_XLA", "quick") == "quick":
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {QUICK_CODEGEN}".strip()
xla_tuning.apply()

import jax  # noqa: E402  (after XDG_CACHE_HOME: nothing here reads it at import)

# In this process only (not as JAX_* variables, which subprocess tests with caches of
# their own would inherit): the directory precompile.enable_compile_cache would choose.
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
    "test_reference_ticks.py", "test_checkpoint.py", "test_cli.py", "test_repo_size.py",
}
FAST_TESTS = {  # the one tiny end-to-end run
    "test_driver.py::test_checkpoint_every_zero_trains_to_the_end_without_checkpoints",
}


# Started first, slowest first (measured), so that no long module is left for the end
# while the other worker idles.
SLOW_FIRST = (
    "test_reliability.py", "test_outputs.py", "test_driver.py", "test_devices.py",
    "test_seed_loop.py", "test_replay_host.py", "test_host_envs_train.py",
    "test_host_time.py", "test_policy.py",
    "test_parity_agent.py", "test_continuous.py", "test_bfloat16.py", "test_gpu_script.py",
    "test_head_agent.py", "test_agent.py", "test_parity_mutations.py", "test_parity_head.py",
)


# Modules that train the same programs (the small CartPole run of tests/_runs.py with one
# seed and with two, in the test process and in `dreamerjax train` children) run on one
# worker, one after another, the first compiling and the others loading its programs from
# the session's cache; on two workers at once both would compile them. Every other module
# is a unit of its own, as `--dist loadfile` makes it (module-scoped runs are made once).
SHARED_PROGRAMS = {
    "small_cartpole": ("test_reliability.py", "test_driver.py", "test_devices.py",
                       "test_policy.py", "test_outputs.py", "test_precompile.py",
                       "test_reliability_memory.py", "test_api.py", "test_videos.py",
                       "test_plan.py", "test_call_path.py"),
}
GROUP_OF = {module: group for group, modules in SHARED_PROGRAMS.items() for module in modules}


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown to pytest without xdist
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the modules of SHARED_PROGRAMS as one unit. (xdist's own
    `--dist loadgroup` does not group under pytest 9.2: it renames items through an
    attribute pytest no longer reads, so each test became a unit and module-scoped runs
    were made once per worker.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedProgramScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return GROUP_OF.get(module.rsplit("/", 1)[-1], module)

    return SharedProgramScheduling(config, log)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        listed = name in FAST_MODULES or f"{name}::{item.name}" in FAST_TESTS
        if listed and item.get_closest_marker("slow") is None:  # a module's slow tests stay slow
            item.add_marker(pytest.mark.fast)
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable


@pytest.fixture(scope="session")
def small_whole_run(tmp_path_factory):
    """The shared small run (tests/_runs.py) of seeds 0 and 1 to its end (rows 80, 160,
    240), trained once per worker: tests/test_driver.py's
    records, report and resume checks and tests/test_devices.py's one-device side read this
    one run (both modules are in one scheduling unit, SHARED_PROGRAMS). Tests must not
    change it (copy it first). tests/test_policy.py trains its own: seeds 0 and 3, a seed
    whose value is not its index."""
    from _runs import small_config

    from dreamerjax.run import driver

    out = tmp_path_factory.mktemp("small_whole_run") / "run"
    driver.train(small_config(), (0, 1), str(out), progress=False)
    return out
