"""The precompile child (dreamerjax/precompile.py): when it runs, that the training process
then loads every compiled program of the run from the persistent cache, and that the
records do not change (slow: three tiny compiles in fresh processes)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _runs import small_argv, without_timing

from dreamerjax.run import precompile

ROOT = Path(__file__).resolve().parents[1]
# The tests' small run (tests/_runs.py); the test is about the cache, so each process
# below has a cache directory of its own (empty at its start), not the session's.
TINY = small_argv()


def test_on_from_the_command_line_unless_its_flag_or_variable_says_no(monkeypatch):
    from dreamerjax.tools import cli

    for var in ("DREAMERJAX_PRECOMPILE", "DREAMERJAX_MALLOC_TRIM"):
        monkeypatch.delenv(var, raising=False)
    assert cli.process_options(cli.parse(["train", "--out", "x"])) == {
        "precompile": True, "malloc_trim": True}
    assert cli.process_options(cli.parse(
        ["train", "--out", "x", "--no-precompile", "--no-malloc-trim"])) == {
        "precompile": False, "malloc_trim": False}
    monkeypatch.setenv("DREAMERJAX_PRECOMPILE", "0")
    assert cli.process_options(cli.parse(["train", "--out", "x"]))["precompile"] is False
    assert cli.parse(["train", "--out", "x"]).compile_here is False  # the backend's choice
    assert cli.parse(["train", "--out", "x", "--compile-here"]).compile_here is True


def test_skipped_without_a_cache_dir_and_for_host_envs(monkeypatch):
    import types

    ran = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(precompile, "_cache_dir", lambda: None)
    compiled = types.SimpleNamespace(host=False)  # what precompile reads of a plan
    assert precompile.precompile(compiled) is None  # --no-compile-cache
    monkeypatch.setattr(precompile, "_cache_dir", lambda: "/nonexistent")
    host = types.SimpleNamespace(host=True)
    assert precompile.precompile(host) is None  # gym_, atari_, dmc_, crafter_
    assert not ran


def test_a_run_precompiles_in_a_child_or_on_a_tpu_in_its_own_process(monkeypatch, tmp_path):
    """driver.train precompiles in a child where one can open the devices; where the
    backend's devices open in one process at a time (a TPU: in_process) it compiles the
    trainer's own programs in its process (here=True), and Settings.precompile_here
    chooses either on any backend. Here on the CPU, with in_process answering as a TPU's
    would; the precompile itself is recorded, not run."""
    import jax
    from _runs import small_config

    from dreamerjax.run import driver
    from dreamerjax.run.settings import Settings

    calls = []
    monkeypatch.setattr(precompile, "precompile", lambda plan, here, trainer, **_: calls.append(
        (plan.seeds, here, trainer is not None)))
    settings = Settings(compile_cache=jax.config.jax_compilation_cache_dir, precompile=True)
    cases = ((False, None, False), (True, None, True), (False, True, True), (True, False, False))
    for tpu, choice, here in cases:
        calls.clear()
        monkeypatch.setattr(precompile, "in_process", lambda tpu=tpu: tpu)
        driver.train(small_config(steps=80), (0,), str(tmp_path / f"run_{tpu}_{choice}"),
                     progress=False,
                     settings=dataclasses.replace(settings, precompile_here=choice))
        assert calls == [((0,), here, True)], (tpu, choice)


def test_the_child_never_preallocates_beside_the_parents_backend(monkeypatch):
    """The real child, started as driver.train starts it: the parent's backend is up (the
    plan asked for its devices; on a GPU it holds 75 % of each), so the child must start
    with preallocation off whatever the parent's environment says, or it would find a
    quarter of each GPU left and fail. The child reports the variables it received.

    Meanwhile the parent lowers the run's trainer's programs and then loads them from the
    cache the child filled: the trainer's calls trace, lower and compile nothing."""
    import jax
    from _runs import small_config

    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run import trainers

    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    config = small_config()
    plan = plan_lib.make_plan(config, (0,), 1)
    assert jax.devices()  # the parent's backend is up before the child starts
    trainer, waited = trainers.CompiledTrainer(plan), []
    # The session's cache (conftest.py): the run's programs, as the driver tests train them.
    out = precompile.precompile(plan, report=config.run.report_every > 0, timeout=1200,
                                trainer=trainer, meanwhile=lambda: waited.append(1))
    assert out is not None, "the precompile child failed"
    assert out["env"] == precompile.CHILD_ENV == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert {"init", "chunk", "eval"} <= set(out["seconds"])
    assert waited == [1] and out["lower_s"] > 0 and out["load_s"] >= 0
    made = []

    def on(event, duration, fun_name="", **_):  # run_chunk's, or jit(run_chunk)'s
        if event.startswith("/jax/core/compile/") and fun_name.removeprefix("jit(").rstrip(
                ")") in ("run_chunk", "_eval_fn", "<lambda>"):
            made.append((event, fun_name))

    jax.monitoring.register_event_duration_secs_listener(on)
    try:
        states, _ = trainer.chunk(trainer.init(), 0)
        jax.block_until_ready(trainer.evaluate(states.agent.params, 0))
    finally:
        jax.monitoring.unregister_event_duration_listener(on)
    assert made == []  # no tracing, lowering or compiling of the run's programs here


def test_malloc_trim_is_harmless():
    assert precompile.malloc_trim() in (True, False)


def test_seaborn_is_deferred_until_used():
    """gymnax imports seaborn (and so scipy.stats, pandas) for Pong's render only, and
    matplotlib.pyplot for Catch's: envs/deferred.py loads each on the first attribute
    read, as the real module."""
    code = ("import sys\n"
            "from dreamerjax.envs.compiled import gymnax as g\n"
            "g.make('CartPole-v1')\n"
            "assert 'scipy' not in sys.modules and 'pandas' not in sys.modules\n"
            "assert type(sys.modules['matplotlib.pyplot']).__name__ == '_Deferred'\n"
            "assert 'matplotlib.font_manager' not in sys.modules\n"
            "import seaborn\n"
            "assert len(seaborn.color_palette('cubehelix', 3)) == 3\n"
            "assert type(sys.modules['seaborn']).__name__ == 'module'\n"
            "from dreamerjax.viz import plots\n"
            "plt = plots.pyplot()\n"
            "assert type(sys.modules['matplotlib.pyplot']).__name__ == 'module'\n"
            "assert plt.get_backend().lower() == 'agg'\n"
            "import gymnax.environments.bsuite.catch as catch\n"
            "assert catch.plt.figure is plt.figure\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=300)


# A `dreamerjax train` process that reports, for each compile of 0.2 s or more (the run's
# own programs), whether it was a persistent-cache hit.
LAUNCH = """
import json, sys
import jax
events, hits = [], []
jax.monitoring.register_event_listener(
    lambda e, **_: hits.append(1) if e.endswith("/cache_hits") else None)
def on(e, d, **kw):
    if e.endswith("backend_compile_duration"):
        events.append({"fun": kw.get("fun_name"), "s": d, "hit": bool(hits)})
        hits.clear()
jax.monitoring.register_event_duration_secs_listener(on)
from dreamerjax.tools import cli
code = cli.main(sys.argv[1:])
print("COMPILES " + json.dumps(events))
sys.exit(code)
"""


def _train(out: Path, cache: Path, *extra, precompile_on: bool = True):
    env = dict(os.environ, XDG_CACHE_HOME=str(cache),
               DREAMERJAX_PRECOMPILE="1" if precompile_on else "0")
    proc = subprocess.run([sys.executable, "-c", LAUNCH, "train", *TINY, "--out", str(out),
                           *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("COMPILES ")][-1]
    return json.loads(line.removeprefix("COMPILES ")), proc.stderr


def _records(out: Path) -> list[dict]:
    with open(out / "records.jsonl") as f:
        return [without_timing(json.loads(x)) for x in f]


@pytest.mark.slow
def test_training_process_loads_every_program_and_records_are_unchanged(tmp_path):
    cache = tmp_path / "cache"
    compiles, _ = _train(tmp_path / "pre", cache)
    assert list((cache / "dreamerjax" / "jax").iterdir()), "the child filled no cache"
    big = [c for c in compiles if c["s"] >= 0.2 or c["fun"] in ("jit(_eval_fn)",)]
    names = {c["fun"] for c in big}
    assert {"jit(<lambda>)", "jit(_eval_fn)"} <= names, compiles
    run_programs = [c for c in compiles if c["fun"] in ("jit(<lambda>)", "jit(_eval_fn)")]
    assert len(run_programs) >= 4 and all(c["hit"] for c in run_programs), run_programs
    # The same run compiled in the training process itself, without any cache.
    _train(tmp_path / "plain", tmp_path / "cache2", "--no-compile-cache",
           precompile_on=False)
    assert _records(tmp_path / "pre") == _records(tmp_path / "plain")


# What a TPU does (a child cannot open its devices beside the parent's): the run's programs
# compiled in this process, several threads at once, into an empty cache; then a trainer's
# first calls load them from it.
IN_PROCESS = """
import json, sys
import jax
from _runs import small_config
from dreamerjax.run import plan as plan_lib, precompile, trainers
precompile.enable_compile_cache(sys.argv[1])
hits = []
jax.monitoring.register_event_listener(
    lambda e, **_: hits.append(e) if e.endswith("/cache_hits") else None)
plan = plan_lib.make_plan(small_config(), (0, 1), 1)
out = precompile.precompile(plan, report=False, here=True)
before = len(hits)
trainer = trainers.CompiledTrainer(plan)
states = trainer.init()
trainer.chunk(states, 0)
print("RESULT " + json.dumps({"out": out, "hits_before": before, "hits": len(hits)}))
"""


def test_in_process_compiles_the_programs_at_once_and_the_trainer_loads_them(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS, str(tmp_path / "cache")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line.removeprefix("RESULT "))
    out = result["out"]
    assert out is not None and out["in_process"]
    assert set(out["seconds"]) == {"init", "chunk", "eval"}
    assert out["wall_s"] >= max(out["seconds"].values())
    assert len(list((tmp_path / "cache").iterdir())) >= 3  # one entry per program at least
    assert result["hits_before"] == 0  # the cache was empty: everything above compiled
    assert result["hits"] >= 2  # the trainer's init and chunk loaded, not compiled again


def test_compile_threads_per_backend(monkeypatch):
    """One per program where the host has the cores; one on a GPU (its compiles autotune
    on the device)."""
    import jax

    assert precompile.compile_workers() == max(1, min(4, os.cpu_count() or 1))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert precompile.compile_workers() == 1
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    monkeypatch.setattr(os, "cpu_count", lambda: 13)
    assert precompile.compile_workers() == 4


def test_cache_check_compares_lowered_texts():
    from _benchmarks import load

    text_diff = load("cache_check.py").text_diff
    assert text_diff("a\nb\n", "a\nb\n") == {"equal": True}
    out = text_diff("a\nb\nc", "a\nB\nc")
    assert out["equal"] is False and out["lines_differing"] == 2
    assert out["first"] == ["-b", "+B"]


def test_startup_phases_alternates_variants_of_flags():
    from _benchmarks import load

    phases = load("startup_phases.py")
    assert phases.variants(None) == [("", [])]
    assert phases.variants(["child:", "here:--compile-here --no-malloc-trim"]) == [
        ("child", []), ("here", ["--compile-here", "--no-malloc-trim"])]
    with pytest.raises(SystemExit):
        phases.variants(["--compile-here"])
    runs = [{"src": None, "variant": v, "exit": e} for v, e in
            (("child", 3.0), ("here", 2.0), ("child", 5.0))]
    assert phases.by_src(runs) == {"None child": {"runs": 2, "exit": 4.0},
                                   "None here": {"runs": 1, "exit": 2.0}}
    assert list(phases.by_src([{"src": "a", "exit": 1.0}])) == ["a"]


@pytest.mark.slow
def test_cache_check_finds_the_trainers_programs_in_the_cache_on_a_cpu(tmp_path):
    """benchmarks/cache_check.py as the chip runs it: on a CPU the programs lowered from
    the abstract state are the trainer's own, and the trainer's big compiles are loads."""
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, "benchmarks/cache_check.py", "--tiny", "--seeds",
                           "1", "--workers", "2", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["lowered_abstract_vs_concrete"] == {"chunk": {"equal": True},
                                                      "eval": {"equal": True}}
    # The chunk compiles for longer than the cache's threshold, so it was stored and loaded
    # (the tiny evaluation compiles in less, and is not stored).
    assert result["ahead_seconds"]["chunk"] >= result["min_compile_time_s"]
    chunks = [c for c in result["trainer_compiles"] if c["fun"] == "jit(run_chunk)"]
    assert chunks and all(c["cache_hit"] for c in chunks), result["trainer_compiles"]


def test_compiled_here_the_trainer_runs_its_own_executables_and_records_are_unchanged(
        monkeypatch, tmp_path):
    """Settings(precompile_here=True), a TPU's path, forced on the CPU: the run's own
    trainer's programs (init, chunk, evaluation, report) are each compiled once, at once
    before `programs_ready`, and handed to the trainer; its calls then trace, lower and
    compile none of them again (JAX's compile events, and its jitted programs' call caches
    stay empty). The records equal those of the same run on the default path (no
    precompile, each program compiled at its first call) bit for bit."""
    import jax
    from _runs import small_config

    from dreamerjax.run import driver, trainers
    from dreamerjax.run.settings import Settings

    config = small_config()
    plain = driver.train(config, (0,), str(tmp_path / "plain"), progress=False)
    events, handed = [], []

    def on(event, duration, fun_name="", **_):
        if event.startswith("/jax/core/compile/"):
            events.append((event.rsplit("/", 1)[-1], fun_name))

    real = precompile.compile_here

    def compile_here(trainer, *args, **kwargs):
        out = real(trainer, *args, **kwargs)
        handed.append((trainer, out))
        events.append(("compiled_here", ""))
        return out

    monkeypatch.setattr(precompile, "compile_here", compile_here)
    jax.monitoring.register_event_duration_secs_listener(on)
    try:
        here = driver.train(config, (0,), str(tmp_path / "here"), progress=False,
                            settings=Settings(precompile=True, precompile_here=True))
    finally:
        jax.monitoring.unregister_event_duration_listener(on)
    assert [without_timing(r) for r in here.records] == \
        [without_timing(r) for r in plain.records]
    assert len(handed) == 1 and handed[0][1] is not None, "compiled at once in this process"
    trainer, out = handed[0]
    assert out["in_process"] and out["executables"] == sorted(trainers.PROGRAMS)
    cut = events.index(("compiled_here", ""))
    before, after = events[:cut], events[cut + 1:]
    compiles = [f for e, f in before if e == "backend_compile_duration"]
    assert compiles.count("jit(run_chunk)") == 1 and compiles.count("jit(_eval_fn)") == 1
    assert compiles.count("jit(<lambda>)") >= 2  # init and report
    assert [x for x in after if x[1] in ("jit(run_chunk)", "jit(_eval_fn)", "run_chunk",
                                         "_eval_fn")] == []
    for name, attr in trainers.PROGRAMS.items():
        program = getattr(trainer, attr)
        assert isinstance(program, trainers.AheadOfTime), name
        assert program.compiled is not None, f"{name}: the executable refused a call"
        assert program.jitted._cache_size() == 0, f"{name}: its jitted program was called"
    timing = json.loads((tmp_path / "here" / "timing.json").read_text())["seconds"]
    assert timing["compile_start"] <= timing["programs_ready"] <= timing["first_log_point"]


def test_a_program_compiled_ahead_refuses_other_arguments_to_its_jitted_self(capsys):
    """AheadOfTime: the executable for the arguments it was compiled for; other static
    arguments, or arguments it refuses (here another shape), go to the jitted program,
    the refusal said once; nothing donated is lost on the way."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from dreamerjax.run import trainers

    jitted = jax.jit(lambda x, scale: x * (2.0 if scale else 1.0), static_argnums=1,
                     donate_argnums=0)
    compiled = jitted.lower(jax.ShapeDtypeStruct((3,), jnp.float32), True).compile()
    program = trainers.AheadOfTime("double", jitted, compiled, (True,))
    assert np.array_equal(program(jnp.ones(3), True), [2.0, 2.0, 2.0])
    assert jitted._cache_size() == 0  # the executable ran
    assert np.array_equal(program(jnp.ones(3), False), [1.0, 1.0, 1.0])  # other static
    assert capsys.readouterr().err == ""
    assert program.compiled is not None
    assert np.array_equal(program(jnp.ones(4), True), [2.0] * 4)  # refused, then jitted
    assert "double program compiled ahead does not take" in capsys.readouterr().err
    assert program.compiled is None and jitted._cache_size() == 2
    assert program.lower(jnp.ones(2), True).compile() is not None  # the jitted's own
