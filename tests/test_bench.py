"""`dreamerjax bench` on the tiny network: the JSON it prints and the files it writes.
No timing is asserted, only that every figure is there, finite and positive."""

import json
import math
import os
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from dreamerjax.tools import bench

KEYS = ("seconds_per_update_per_seed", "compile_seconds_cold", "compile_seconds_warm",
        "compile_seconds", "flops_per_update", "achieved_flops_per_s",
        "matmul_peak_flops_per_s", "efficiency", "rows_per_s_no_update", "peak_rss_mib",
        "report_seconds_wide", "report_bytes_wide")


RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The bench without --out, run from an empty folder: stdout only (with its compile
    children, which --tiny alone leaves out)."""
    cwd = tmp_path_factory.mktemp("cwd")
    args = types.SimpleNamespace(json=True, tiny=True, seeds=(1,), updates=3, warmup=1,
                                 compile="children")
    capture = pytest.MonkeyPatch()
    lines = []
    capture.setattr("builtins.print", lambda *a, **k: lines.append(" ".join(map(str, a))))
    capture.chdir(cwd)
    try:
        code = bench.main(args)
    finally:
        capture.undo()
    return code, lines, cwd


def _positive(x):
    return isinstance(x, int | float) and math.isfinite(x) and x > 0


@pytest.mark.slow  # the bench's cold/warm compile workers: a minute
def test_json_has_every_figure(smoke):
    code, lines, _ = smoke
    assert code == 0
    assert len(lines) == 1  # exactly one JSON object on stdout
    r = json.loads(lines[0])
    assert set(KEYS) <= set(r)
    for k in KEYS[1:]:
        assert _positive(r[k]), k
    s = r["seconds_per_update_per_seed"]
    assert list(s) == ["1"]
    assert s["1"]["n"] == r["points"]["1"]["chunks_timed"] == 3  # one figure per chunk
    assert all(_positive(s["1"][q]) for q in ("median", "p10", "p90"))
    assert s["1"]["p10"] <= s["1"]["median"] <= s["1"]["p90"]
    assert r["efficiency"] == pytest.approx(r["achieved_flops_per_s"]
                                            / r["matmul_peak_flops_per_s"])
    assert r["compile_mode"] == "children" and r["flops_source"] == "cpu cost analysis"
    assert r["machine"]["backend"] == jax.default_backend()
    assert r["config"]["size"] == "tiny"


@pytest.mark.slow  # the bench's cold/warm compile workers: a minute
def test_warm_compile_reads_the_cold_cache(smoke):
    r = json.loads(smoke[1][0])
    assert r["compile_by_seeds"]["cold"]["1"]["cache_hits"] == 0
    assert r["compile_by_seeds"]["warm"]["1"]["cache_hits"] > 0


@pytest.mark.slow  # the bench's cold/warm compile workers: a minute
def test_nothing_written_without_out_and_the_result_written_where_named(smoke, tmp_path):
    _, lines, cwd = smoke
    assert list(cwd.iterdir()) == []  # no results/ or any file in the working folder
    r = json.loads(lines[0])
    assert bench.write_results(r, str(tmp_path / "one.json")) == [str(tmp_path / "one.json")]
    assert json.loads((tmp_path / "one.json").read_text()) == r
    paths = bench.write_results(r, str(tmp_path / "folder"))
    assert [os.path.basename(p) for p in paths] == [
        f"bench_{r['machine']['backend']}_{r['date'][:10].replace('-', '')}.json", "README.md"]
    assert json.loads(Path(paths[0]).read_text()) == r
    md = Path(paths[1]).read_text()
    assert "| s / update / seed, 1 seed |" in md
    assert "dreamerjax bench --json --tiny" in md


def test_tiny_is_a_smoke_check_of_one_compile():
    """--tiny alone (the bench's smoke check) times one seed count whose programs compile
    once, in this process; the full bench keeps its seed counts and, on a CPU, its cold
    and warm compile children; --seeds and --compile still choose."""
    cpu = jax.default_backend() == "cpu"
    tiny, full = bench.Options(tiny=True), bench.Options()
    assert (bench.seed_counts(tiny), bench.compile_mode(tiny)) == ([1], "in-process")
    assert (bench.seed_counts(full), bench.compile_mode(full)) == (
        [1, 3], "children" if cpu else "in-process")
    chosen = bench.Options(tiny=True, seeds=(2, 2, 4), compile="children")
    assert bench.seed_counts(chosen) == [2, 4]
    if cpu:
        assert bench.compile_mode(chosen) == "children"


def test_out_folder_table_has_one_column_per_result(tmp_path):
    """--out DIR: the result's JSON beside those already there, and README.md with one
    dreamerjax column per bench_*.json, oldest first, and no figure it did not measure."""
    old = sorted(RESULTS.glob("bench_cpu_*.json"))
    assert len(old) >= 2
    for p in old[:-1]:
        (tmp_path / p.name).write_text(p.read_text())
    newest = json.loads(old[-1].read_text())
    paths = bench.write_results(newest, str(tmp_path))
    assert paths == [str(tmp_path / old[-1].name), str(tmp_path / "README.md")]
    md = (tmp_path / "README.md").read_text()
    head = next(line for line in md.splitlines() if line.startswith("| figure"))
    assert head == "| figure | " + " | ".join(
        f"dreamerjax [{i + 1}]" for i in range(len(old))) + " |"
    row = next(line for line in md.splitlines() if line.startswith("| s / update / seed, 1"))
    s = newest["seconds_per_update_per_seed"]["1"]
    assert row.endswith(f"| {s['median']:.3f} (p10 {s['p10']:.3f}, p90 {s['p90']:.3f}) |")
    assert "reference" not in head and "target" not in head
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [p.name for p in old] + ["README.md"])


def test_unrolled_scans_restore_scan():
    orig = jax.lax.scan
    with bench.unrolled_scans():
        assert jax.lax.scan is not orig
        y = jax.lax.scan(lambda c, x: (c + x, c), 0.0, jnp.arange(4.0))
    assert jax.lax.scan is orig
    assert float(y[0]) == 6.0


def test_analytic_flops_scale_with_horizon():
    setup = bench.make_setup(tiny=True)
    a = bench.analytic_flops(setup)
    assert _positive(a["imagination"]) and _positive(a["observe_fwd_bwd"])
    import dataclasses
    longer = dataclasses.replace(setup, config=dataclasses.replace(
        setup.config, agent=dataclasses.replace(setup.config.agent, imag_length=30)))
    assert bench.analytic_flops(longer)["imagination"] > 1.9 * a["imagination"]


def test_env_bench_options():
    """`bench --env`: the compiled twin of a gym_ id, the chunk of the replay's gate, and
    the flags (the whole run is timed by hand: minutes on this machine)."""
    from dreamerjax.tools import cli

    pytest.importorskip("gymnasium")
    assert bench.compiled_counterpart("gym_CartPole-v1") == "CartPole-v1"
    assert bench.compiled_counterpart("gym_NoSuchEnv-v0") is None
    assert bench.compiled_counterpart("atari100k_pong") is None
    # 16 envs: the first update falls after tick 64 (1,040 rows), in chunk 12 of 5 ticks
    assert bench.gate_chunks(bench.Options(env="gym_CartPole-v1")) == 13
    args = cli.parse(["bench", "--env", "gym_CartPole-v1", "--rounds", "0"]).validate()
    opts = bench.Options.of(args)
    assert (opts.env, opts.rounds, opts.stretch, opts.num_envs) == ("gym_CartPole-v1", 0, 5, 16)
    with pytest.raises(cli.ArgumentError, match="unknown suite"):
        cli.parse(["bench", "--env", "nosuch_x"]).validate()
    # --set reaches both runs' config (MinAtar's 10 x 10 frames need a smaller CNN) and the
    # recorded command.
    sets = ("enc.simple.mults=[1,2]", "enc.simple.minres=5")
    opts = bench.Options(env="gymnax_Breakout-MinAtar", compiled="", set=sets)
    config = bench.env_config(opts.env, opts, 20)
    assert (config.agent.enc.mults, config.agent.enc.minres) == ((1, 2), 5)
    assert bench._env_argv(opts)[-4:] == ["--set", sets[0], "--set", sets[1]]
    # ...from the command line too, checked like the update bench's
    args = cli.parse(["bench", "--env", "gymnax_Breakout-MinAtar", "--compiled", "",
                      "--set", sets[0], "--set", sets[1]]).validate()
    assert bench.Options.of(args).set == sets
    with pytest.raises(cli.ArgumentError, match="enc.simple.minres"):
        cli.parse(["bench", "--env", "gymnax_Breakout-MinAtar", "--set",
                   "enc.simple.minres=x"]).validate()


def test_size_option_reaches_the_benched_config_and_is_checked():
    """`bench --size 12m` benches the 12m preset (the GPU script's second size), names it
    in the recorded command and config, and writes only to --out; a bad size is refused."""
    from dreamerjax.config.defaults import SIZES
    from dreamerjax.tools import cli

    opts = bench.Options.of(cli.parse(["bench", "--size", "12m"]).validate())
    assert opts.size == "12m" and bench._argv(opts)[:2] == ["--size", "12m"]
    setup = bench.make_setup(False, (), opts.size)
    assert setup.config.agent.rssm.deter == SIZES["12m"]["deter"]
    assert bench.Options.of(cli.parse(["bench"]).validate()).size == "1m"
    with pytest.raises(cli.ArgumentError, match="--size '3m'"):
        cli.parse(["bench", "--size", "3m"]).validate()


def _gpu_sh(out, **env):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.sh"
    return subprocess.run(["bash", str(script), str(out)], capture_output=True, text=True,
                          env=os.environ | {"PYTHON": sys.executable, **env}, check=False)


def test_gpu_script_records_the_devices_and_stops_without_a_gpu(tmp_path):
    """benchmarks/gpu.sh on a CPU: devices.json written, exit 2 with a one-line reason,
    nothing benched (no figure without a GPU)."""
    proc = _gpu_sh(tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert json.loads((tmp_path / "devices.json").read_text())["backend"] == "cpu"
    assert "no GPU backend" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["devices.json"]


@pytest.mark.slow  # two tiny benches with their compile workers: minutes
def test_gpu_script_smoke_runs_every_configuration(tmp_path):
    proc = _gpu_sh(tmp_path, SMOKE="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for dtype in ("float32", "bfloat16"):
        out = json.loads((tmp_path / f"bench_tiny_{dtype}.json").read_text())
        assert out["config"]["compute_dtype"] == dtype
        assert set(out["seconds_per_update_per_seed"]) == {"1", "2"}


# ----------------------------------------------------------------------------- the run's programs


@pytest.fixture(scope="module")
def tiny_bench():
    """`bench --tiny --json --seeds 1 --updates 1 --warmup 0 --compile in-process`: one
    compile of the run's tiny chunk. (its JSON, its validate and make_setup calls)"""
    from _counting import plan_calls

    args = types.SimpleNamespace(json=True, tiny=True, seeds=(1,), updates=1, warmup=0,
                                 compile="in-process")
    capture = pytest.MonkeyPatch()
    lines = []
    capture.setattr("builtins.print", lambda *a, **k: lines.append(" ".join(map(str, a))))
    try:
        checks, setups, code = plan_calls(lambda: bench.main(args))
    finally:
        capture.undo()
    assert code == 0 and len(lines) == 1
    return json.loads(lines[0]), (checks, setups)


@pytest.fixture(scope="module")
def tiny_run(tiny_bench):
    return tiny_bench[0]


def test_bench_makes_one_plan(tiny_bench):
    """The benched config is checked once and its setup built once, by the run's plan
    (its other seed counts' plans come from it: plan.for_seeds, tests/test_plan.py)."""
    assert tiny_bench[1] == (1, 1)


def test_bench_json_records_the_device_and_the_point(tiny_run):
    r = tiny_run
    assert (r["platform"], r["device_kind"], r["jax"]) == (
        jax.default_backend(), jax.devices()[0].device_kind, jax.__version__)
    assert (r["size"], r["dtype"], r["seeds"], r["compile_mode"]) == (
        "tiny", "float32", [1], "in-process")
    p = r["points"]["1"]
    for key in ("seconds_per_update", "seconds_per_update_per_seed"):
        assert p[key]["n"] == p["chunks_timed"] >= 3
        assert p[key]["p10"] <= p[key]["median"] <= p[key]["p90"]
    assert r["seconds_per_update"]["1"] == p["seconds_per_update"]
    assert _positive(r["compile_seconds"]) and r["compile_seconds"] == \
        p["compile_seconds"]["total"]
    assert _positive(r["flops_per_update"]) and r["flops_source"] == "cpu cost analysis"
    assert r["achieved_flops_per_s"] == pytest.approx(
        r["flops_per_update"] / p["seconds_per_update"]["median"])
    # no peak in the table for a CPU: no fraction of it; the measured matmul peak instead
    assert r["peak_flops_per_s"] is None and r["fraction_of_peak"] is None
    assert _positive(r["efficiency"]) and _positive(r["rows_per_s_no_update"])
    assert 0 < p["memory"]["state_bytes"] < p["memory"]["available_bytes"]


def test_bench_tiny_runs_the_runs_trainer_and_schedule(tiny_run):
    """The bench's point is the run's: the plan's seed loop, the updates the run's schedule
    owes over the timed chunks, and no compile while they ran (the program compiled
    ahead is the one trainer.chunk calls)."""
    from dreamerjax.run import loop
    from dreamerjax.run import plan as plan_lib

    p = tiny_run["points"]["1"]
    opts = bench.Options(tiny=True, seeds=(1,), updates=1, warmup=0)
    config, layout = bench.point_config(opts, "1m")
    plan = plan_lib.make_plan(config, (0,))
    assert p["seed_loop"] == plan.seed_loop
    owed = loop.updates_per_tick(plan.setup).reshape(layout.chunks, layout.ticks).sum(1)
    assert (owed[:layout.fill] == 0).all() and (owed[layout.fill + layout.warm:] > 0).all()
    assert p["updates_timed"] == owed[layout.fill + layout.warm:].sum()
    assert p["chunks_timed"] == layout.timed and p["ticks_per_chunk"] == layout.ticks
    assert p["compiled_while_timed"] == 0


class WithoutCostAnalysis:
    """A compiled program as a backend without cost analysis hands it over (the TPU's
    and GPU plugins' lowered programs): everything of the real one but its costs."""

    def __init__(self, compiled):
        self.compiled = compiled

    def cost_analysis(self):
        return None


class Costs:
    """A program whose cost analysis has the given form."""

    def __init__(self, value):
        self.value = value

    def cost_analysis(self):
        return self.value


def test_flops_fall_back_to_the_cpu_lowering_when_cost_analysis_is_none():
    from dreamerjax.tools import accelerators

    n = 64
    f = jax.jit(lambda a, b: a @ b)
    x = jax.ShapeDtypeStruct((n, n), jnp.float32)
    real = accelerators.program_flops(f, (x, x), f.trace(x, x).lower().compile())
    assert real == (2 * n**3, "cpu cost analysis")
    flops, source = accelerators.program_flops(f, (x, x), WithoutCostAnalysis(
        f.trace(x, x).lower().compile()))
    assert flops == 2 * n**3 and source.startswith("cpu lowering")
    # the other forms a backend gives: a list of per-program dicts, a dict without flops
    assert accelerators.cost_flops(Costs([{"flops": 8.0}])) == 8.0
    assert accelerators.cost_flops(Costs({"bytes accessed": 8.0})) is None
    assert accelerators.cost_flops(Costs([])) is None
    flops, source = accelerators.program_flops(f, (x, x), Costs({"utilization": 1.0}))
    assert flops == 2 * n**3 and source.startswith("cpu lowering")


def test_peak_table_by_device_kind_and_dtype():
    from dreamerjax.tools import accelerators

    assert accelerators.peak_flops("TPU v5 lite", "bfloat16")[0] == 197e12
    # float32 on a TPU: bfloat16 passes at the matmul precision in effect
    assert accelerators.peak_flops("TPU v5 lite", "float32")[0] == 197e12
    assert accelerators.peak_flops("TPU v5 lite", "float32", "highest")[0] == 197e12 / 6
    assert accelerators.peak_flops("TPU v4", "bfloat16")[0] == 275e12
    assert accelerators.peak_flops("NVIDIA A100-SXM4-40GB", "float32")[0] == 19.5e12
    assert accelerators.peak_flops("NVIDIA H100 80GB HBM3", "bfloat16")[0] == 989e12
    assert accelerators.peak_flops("NVIDIA H100 PCIe", "bfloat16")[0] is None
    assert accelerators.peak_flops("cpu", "float32")[0] is None
    assert accelerators.known("TPU v5 lite").memory == 16 * 2**30


def _sweep_lines(opts):
    capture = pytest.MonkeyPatch()
    lines = []
    capture.setattr("builtins.print", lambda *a, **k: lines.append(" ".join(map(str, a)))
                    if "file" not in k else None)
    try:
        assert bench.run_sweep(opts) == 0
    finally:
        capture.undo()
    return [json.loads(x) for x in lines]


def test_sweep_writes_one_line_per_point_and_goes_on_from_its_file(tmp_path):
    """Every point ends in one line: one already in the file is not run again, one a time
    limit cut off twice is skipped, one whose state exceeds the memory is skipped before
    anything compiles (and so are more seeds of its size and dtype)."""
    out = tmp_path / "sweep.jsonl"
    done = {"size": "200m", "dtype": "bfloat16", "seeds": 64, "status": "ok"}
    cut = {"size": "200m", "dtype": "bfloat16", "seeds": 128, "status": "started"}
    out.write_text("".join(json.dumps(x) + "\n" for x in (done, cut, cut)))
    opts = bench.Options(sweep=True, sizes=("200m",), dtypes=("float32", "bfloat16"),
                         seeds=(64, 128), updates=1, warmup=0, out=str(out))
    printed = _sweep_lines(opts)
    final = [x for x in printed if x["status"] != "started"]
    assert [(x["dtype"], x["seeds"], x["status"]) for x in final] == [
        ("float32", 64, "skipped"), ("float32", 128, "skipped"), ("bfloat16", 128, "cut_off")]
    assert "fit" in final[0]["reason"] and "fewer seeds" in final[1]["reason"]
    assert all(x["platform"] == jax.default_backend() for x in printed)
    written = [json.loads(x) for x in out.read_text().splitlines()]
    assert written[3:] == printed  # appended as printed
    finished = {(x["size"], x["dtype"], x["seeds"]) for x in written if x["status"] != "started"}
    assert finished == {(s, d, n) for s, d, n in bench.sweep_points(opts)}
    assert _sweep_lines(opts) == []  # again: every point has its line
