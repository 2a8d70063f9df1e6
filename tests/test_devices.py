"""Seeds sharded over devices: 2 seeds on 2 (forced host) devices give the records of 1 device,
the state lives sharded on a 'seed' mesh axis, and the chunk never gathers it."""

import json
import os
import textwrap
from pathlib import Path

import pytest
from _runs import small_argv, without_timing
from _xla import json_of_child, train_in_processes

from dreamerjax.run.records import read_episodes, read_records

TESTS = Path(__file__).parent
# The small run's log points (tests/_runs.py) for seeds 0 and 1, in records order.
ROWS = [(seed, rows) for rows in (80, 160, 240) for seed in (0, 1)]

# XLA_FLAGS must be set before jax is imported, so the run happens in a fresh interpreter.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    import jax
    import jax.numpy as jnp
    from dreamerjax.run import driver, loop as train
    from dreamerjax.run import records, setup as setup_lib
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer

    out = sys.argv[1]
    sys.path.insert(0, sys.argv[2])  # tests/, for the shared small run
    from _runs import small_config
    specs = lambda tree: sorted({json.dumps(list(x.sharding.spec)) for x in jax.tree.leaves(tree)})
    # The session's persistent cache (XDG_CACHE_HOME, tests/conftest.py): the Trainer built
    # below for the sharding checks then reuses the chunk that train(devices=2) compiled
    # instead of compiling it again.
    jax.config.update("jax_compilation_cache_dir",
                      os.path.join(os.environ["XDG_CACHE_HOME"], "dreamerjax", "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    cfg = small_config()
    res = {"device_count": jax.device_count()}
    res["records_2"] = driver.train(cfg, (0, 1), os.path.join(out, "d2"), devices=2,
                                    progress=False).records
    res["episodes_2"] = records.read_episodes(os.path.join(out, "d2"))

    tr = make_trainer(make_plan(cfg, (0, 1), 2))
    st = tr.init()
    res["init_shardings"] = specs(st)
    res["init_mesh"] = [dict(tr.sharding.mesh.shape), list(tr.sharding.mesh.axis_names)]
    res["init_devices"] = sorted({len(x.sharding.device_set) for x in jax.tree.leaves(st)})
    res["shard_rows"] = sorted({s.data.shape[0] for x in jax.tree.leaves(st)
                                for s in x.addressable_shards})
    due = jnp.asarray(tr.updates_due[:tr.setup.ticks_per_log])
    compiled = tr._chunk.lower(st, due).compile()
    hlo = compiled.as_text()
    res["collectives"] = [op for op in ("all-gather", "all-reduce", "all-to-all",
                                        "collective-permute", "reduce-scatter") if op in hlo]
    keys = tr._keys()
    eval_hlo = tr._eval.lower(st.agent.params, keys, False).compile().as_text()
    res["eval_collectives"] = [op for op in ("all-gather", "all-reduce", "all-to-all",
                                             "collective-permute", "reduce-scatter")
                               if op in eval_hlo]
    st2, ends = compiled(st, due)
    res["chunk_shardings"] = specs(st2)
    res["ends_shardings"] = specs(ends)
    print(json.dumps(res))
""")


@pytest.fixture(scope="module")
def one_device(small_whole_run):
    """The same two seeds on this process's one device: the session's small run
    (conftest.py), so only the two-device run needs a fresh interpreter."""
    return read_records(small_whole_run)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("devices")
    return json_of_child(SCRIPT, out, TESTS, devices=2)


def _strip(records):
    return [without_timing(r) for r in records]


def _same(a, b, path=""):
    """Equal structure, equal ints/bools/strings; floats equal to float32 rounding. One
    device runs each seed's 1-seed program (run.seed_loop auto on a CPU: threads), two
    devices a vmapped batch of 1 each, and XLA may order a float32 reduction differently
    for the two programs; measured differences (on a run of 25 updates per window)
    were below 3e-6 relative."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-9), path
    else:
        assert a == b and type(a) is type(b), path


def test_two_devices_give_the_records_of_one(result, one_device, small_whole_run):
    assert result["device_count"] == 2
    two, one = _strip(result["records_2"]), _strip(one_device)
    assert [(r["seed"], r["rows"]) for r in two] == ROWS
    assert two[-1]["updates"] > 0  # the gate opened, so updates ran on both devices
    # What the run decides by (episodes, evaluation, counts) is identical.
    assert result["episodes_2"] == read_episodes(small_whole_run)
    for r2, r1 in zip(two, one, strict=True):
        for k in ("seed", "rows", "updates", "eval_returns", "eval_lengths"):
            assert r2[k] == r1[k], k
    _same(two, one)


def test_state_is_sharded_over_the_seed_axis(result):
    assert result["init_mesh"] == [{"seed": 2}, ["seed"]]
    assert result["init_shardings"] == ['["seed"]']
    assert result["init_devices"] == [2]
    assert result["shard_rows"] == [1]  # each device holds one seed of every leaf


def test_chunk_keeps_seeds_sharded_without_collectives(result):
    assert result["chunk_shardings"] == ['["seed"]']
    assert result["ends_shardings"] == ['[null, "seed"]']
    assert result["collectives"] == []


def test_evaluation_runs_each_devices_seeds_without_collectives(result):
    """The evaluation's while_loop stops on its own device's seeds (shard_map): a loop
    condition reduced over the sharded seed axis would be an all-reduce."""
    assert result["eval_collectives"] == []


@pytest.mark.slow  # two processes each compile the whole run: minutes on 2 cores
def test_two_processes_give_the_records_of_two_devices(result, tmp_path):
    """A multi-host run on one machine: 2 processes with 1 CPU device each, joined by
    `--distributed`, train seeds 0 and 1 (one per process) into one shared run directory,
    which process 0 writes; its records are those of 2 devices in one process."""
    out = tmp_path / "run"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    argv = [*small_argv(), "--seeds", "0", "1", "--devices", "2", "--no-compile-cache",
            "--out", str(out)]
    train_in_processes(argv, [tmp_path / f"process{i}.log" for i in (0, 1)], env, 900)
    with open(out / "records.jsonl") as f:
        recs = [json.loads(line) for line in f]
    two = _strip(result["records_2"])
    assert [(r["seed"], r["rows"]) for r in recs] == ROWS
    assert read_episodes(out) == result["episodes_2"]
    for rp, r2 in zip(_strip(recs), two, strict=True):
        for k in ("seed", "rows", "updates", "eval_returns", "eval_lengths"):
            assert rp[k] == r2[k], k
    _same(_strip(recs), two)
    assert (out / "curves.png").is_file() and (out / "checkpoints" / "0").is_dir()
