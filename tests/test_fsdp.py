"""One seed's parameters stored sharded over HEAD's FSDP axis (jax.train_mesh 'd,f,t' with
f > 1; algo/fsdp.py): real XLA devices, 4 forced host devices in a child interpreter.

- The rule: which axis of a leaf splits, by its global shape alone.
- A small HEAD CartPole run on mesh 1,2,1 (parameters, slow critic and optimiser moments as
  slices over 'fsdp') equals the same run on mesh 2,1,1 (two plain data devices, every
  leaf whole on both): the same batch shards and keys, so only the order of float32 sums
  differs. Its state really lies in slices, and a checkpoint holds the whole parameters:
  a restore puts them back in slices, the policy export reads them whole, and a run
  stopped at its second log point resumes to the uninterrupted run's records and
  parameters exactly.
- The same equality and slicing for host envs (Gymnasium CartPole through the host
  trainer), when the gym extra is installed.
"""

import textwrap
from pathlib import Path

import pytest
from _xla import json_of_child

from dreamerjax.algo import fsdp

TESTS = Path(__file__).parent

SCRIPT = textwrap.dedent("""
    import dataclasses, json, os, sys
    import numpy as np
    import jax
    sys.path.insert(0, sys.argv[1])
    from dreamerjax.run import checkpoint as ckpt, driver, records, setup as setup_lib
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer, without_rows
    from dreamerjax.run.policy import load_policy
    from _runs import at_head, small_config, without_timing

    out, res = sys.argv[2], {"device_count": jax.device_count()}

    def config(mesh, env="CartPole-v1"):
        cfg = at_head(small_config(env))
        return dataclasses.replace(cfg, run=dataclasses.replace(
            cfg.run, train_devices=(0, 1), train_mesh=mesh))

    def train(mesh, name, env="CartPole-v1", **kw):
        return driver.train(config(mesh, env), (0,), os.path.join(out, name), progress=False,
                            tensorboard=False, report=False, **kw)

    def leaves(params):
        return [np.asarray(x, np.float64) for x in jax.tree.leaves(params)]

    def strip(recs):
        return [without_timing(r) for r in recs]

    data, sliced = train("2,1,1", "data"), train("1,2,1", "fsdp")
    pd, ps = leaves(data.params[0]), leaves(sliced.params[0])
    res["param_max_diff"] = max(float(np.abs(x - y).max()) for x, y in zip(pd, ps))
    res["param_max"] = max(float(np.abs(x).max()) for x in pd)
    res["records"] = [[{k: r[k] for k in ("rows", "updates", "eval_returns")} for r in run.records]
                      for run in (data, sliced)]
    res["metric_rel_diff"] = {}
    for a, b in zip(data.records, sliced.records):
        for k, v in (a["train"] or {}).items():
            w = b["train"][k]
            if isinstance(v, float):
                diff = abs(v - w) / max(abs(v), 1e-3)
                res["metric_rel_diff"][k] = max(res["metric_rel_diff"].get(k, 0.0), diff)

    # How the state lies: a leaf split by the rule, its optimiser moments alike.
    trainer = make_trainer(make_plan(config("1,2,1"), (0,)))
    state = trainer.init()
    res["mesh"] = dict(trainer.mesh.shape)
    kernel = state.agent.params["rew"]["h0"]["kernel"]  # [1, 80, 16]
    res["kernel_spec"] = [str(x) for x in kernel.sharding.spec]
    res["kernel_shards"] = sorted({tuple(s.data.shape) for s in kernel.addressable_shards})
    nu = [x for x in jax.tree.leaves(state.agent.opt_state) if x.shape == kernel.shape]
    res["moment_specs"] = sorted({str(x.sharding.spec) for x in nu})
    res["slow_spec"] = str(state.agent.slow["dist"]["out"]["kernel"].sharding.spec)
    res["replay_spec"] = [str(x) for x in
                          jax.tree.leaves(state.replay.data)[0].sharding.spec]
    dev = jax.devices()[0]
    agent = jax.tree.leaves(state.agent)
    res["agent_bytes"] = sum(x.nbytes for x in agent)
    res["agent_bytes_device0"] = sum(s.data.nbytes for x in agent
                                     for s in x.addressable_shards if s.device == dev)

    # The checkpoint: whole parameters, restored into slices; the policy reads them whole.
    run_dir = os.path.join(out, "fsdp")
    index, _ = ckpt.latest_verified(run_dir)
    restored = ckpt.restore(run_dir, index, without_rows(trainer.abstract_state()))
    res["restored_spec"] = [str(x) for x in
                            restored.agent.params["rew"]["h0"]["kernel"].sharding.spec]
    res["restored_equal"] = all(np.array_equal(np.asarray(x)[0], y) for x, y in zip(
        jax.tree.leaves(restored.agent.params), jax.tree.leaves(sliced.params[0])))
    res["policy_equal"] = all(np.array_equal(np.asarray(x), y) for x, y in zip(
        jax.tree.leaves(load_policy(run_dir, 0).params), jax.tree.leaves(sliced.params[0])))

    # Stopped at its second log point and resumed: the uninterrupted run's numbers.
    train("1,2,1", "resumed", stop_after_rows=160)
    resumed = train("1,2,1", "resumed", resume=True)
    res["resumed_records_equal"] = (strip(records.read_records(run_dir))
                                    == strip(records.read_records(os.path.join(out, "resumed"))))
    res["resumed_params_equal"] = all(np.array_equal(x, y) for x, y in zip(
        leaves(resumed.params[0]), ps))
    res["resumed_rows"] = [r["rows"] for r in resumed.records]

    # Host envs (Gymnasium CartPole), when the extra is installed: the host trainer slices
    # the state alike and its run equals the plain data-parallel one.
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        res["host"] = None
    else:
        host_data = train("2,1,1", "host_data", "gym_CartPole-v1")
        host_sliced = train("1,2,1", "host_fsdp", "gym_CartPole-v1")
        hd, hs = leaves(host_data.params[0]), leaves(host_sliced.params[0])
        host_trainer = make_trainer(make_plan(config("1,2,1", "gym_CartPole-v1"), (0,)))
        host_kernel = host_trainer.init().agent.params["rew"]["h0"]["kernel"]
        res["host"] = {
            "records": [[{k: r[k] for k in ("rows", "updates", "eval_returns")}
                         for r in run.records] for run in (host_data, host_sliced)],
            "param_max_diff": max(float(np.abs(x - y).max()) for x, y in zip(hd, hs)),
            "param_max": max(float(np.abs(x).max()) for x in hd),
            "kernel_spec": [str(x) for x in host_kernel.sharding.spec]}
    print(json.dumps(res))
""")


@pytest.mark.parametrize("shape, size, axis", [
    ((80, 16), 2, 0),  # the largest axis that divides
    ((16, 255), 2, 0),  # 255 does not divide: the next largest
    ((64, 64), 2, 1),  # a tie: the last
    ((8, 56, 8), 2, 1),
    ((8, 8, 24), 4, 2),
    ((255, 5), 2, fsdp.REPLICATED),  # no axis divides
    ((16, 16), 2, fsdp.REPLICATED),  # below MIN_ELEMENTS
    ((4096,), 1, fsdp.REPLICATED),  # one device: nothing to split
])
def test_rule_splits_the_largest_dividing_axis(shape, size, axis):
    assert fsdp.shard_dim(shape, size) == axis
    entries = fsdp.spec_entries((1, *shape), size, 1)
    assert entries == (() if axis == fsdp.REPLICATED else (*(None,) * axis, fsdp.FSDP_AXIS))


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return json_of_child(SCRIPT, TESTS, tmp_path_factory.mktemp("fsdp"), devices=4)


def test_sliced_run_equals_the_plain_data_parallel_run(result):
    """55 updates: the runs act alike (same evaluation returns at every log point), and the
    parameters and metrics differ by float32 summation order only (the gradients' average
    and the whole-tensor norms are summed in another order)."""
    data, sliced = result["records"]
    assert data == sliced
    assert sliced[-1]["updates"] > 0  # HEAD's gate (schedule_from_config) opens later
    assert result["param_max_diff"] <= 1e-6 * result["param_max"]
    worst = max(result["metric_rel_diff"], key=result["metric_rel_diff"].get)
    assert result["metric_rel_diff"][worst] < 1e-5, worst


def test_state_lies_in_slices_over_fsdp(result):
    assert result["device_count"] == 4
    assert result["mesh"] == {"seed": 1, "data": 1, "fsdp": 2}
    assert result["kernel_spec"] == ["seed", "fsdp"]
    assert result["kernel_shards"] == [[1, 40, 16]]
    assert result["moment_specs"] == ["P('seed', 'fsdp')"]
    assert result["slow_spec"] == "P('seed', 'fsdp')"  # [1, 16, 255]
    assert result["replay_spec"] == ["seed", "('data', 'fsdp')"]
    # Most of the tiny agent's bytes are in leaves the rule splits.
    assert result["agent_bytes_device0"] < 0.65 * result["agent_bytes"]


def test_checkpoint_holds_whole_parameters(result):
    assert result["restored_spec"] == ["seed", "fsdp"]
    assert result["restored_equal"]
    assert result["policy_equal"]


def test_sliced_run_resumes_from_its_checkpoint(result):
    assert result["resumed_rows"] == [240]
    assert result["resumed_records_equal"]
    assert result["resumed_params_equal"]


def test_host_env_run_is_sliced_and_equals_the_plain_data_parallel_run(result):
    host = result["host"]
    if host is None:
        pytest.skip("gymnasium is not installed (pip install 'dreamerjax[gym]')")
    data, sliced = host["records"]
    assert data == sliced
    assert sliced[-1]["updates"] > 0
    assert host["kernel_spec"] == ["seed", "fsdp"]
    assert host["param_max_diff"] <= 1e-6 * host["param_max"]
