"""One seed's agent trained data-parallel (jax.train_devices) on real XLA devices: 4 forced
host devices in a child interpreter (XLA_FLAGS must be set before JAX starts).

- The update on 2 devices, each with half of a global batch, equals the update on one
  device with the whole batch: the averaged gradients, the loss and the posterior latents
  to float32 summation order, the return normaliser's percentiles those of the whole batch.
  The batch and start state are the reference fixture's (tests/data/reference/update.npz),
  whose update is deterministic (sample_mode, as the parity check runs it).
- A small run with 2 seeds x 2 data devices (a 2 x 2 mesh) follows the schedule's update
  counts with finite evaluations, its envs and replay sharded over the data axis; so does
  a Gymnasium CartPole seed (host envs) on 2 data devices.
"""

import math
import textwrap
from pathlib import Path

import pytest
from _runs import STEPS, UPDATES
from _xla import json_of_child

TESTS = Path(__file__).parent

SCRIPT = textwrap.dedent("""
    import dataclasses, json, os, sys
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P
    sys.path.insert(0, sys.argv[1])
    from dreamerjax.algo import agent as agent_lib, normalize
    from dreamerjax.tools.parity import agent_checks as ac
    from dreamerjax.tools.parity import agent_fixtures
    from dreamerjax.run import driver, setup as setup_lib
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer
    from _runs import small_config

    out, res = sys.argv[2], {"device_count": jax.device_count()}
    ref = os.path.join(sys.argv[1], "data", "reference")
    flat = dict(np.load(os.path.join(ref, "update.npz")))
    start = {k[len("u0/state/"):]: v for k, v in flat.items() if k.startswith("u0/state/")}
    cfg, spaces, _ = ac.family(ref, "", flat, "b1_data_", start)
    batch = agent_fixtures.batch_from(flat, "b1_data_", spaces)
    state = ac.load_state(start, cfg)
    key = jax.random.PRNGKey(0)

    def one(st, b):
        total, aux, grads = agent_lib.gradients(st, cfg, spaces, b, key)
        new, outs, _ = agent_lib.apply_gradients(st, cfg, total, aux, grads)
        return new, dict(grads=grads, total=total, replay=outs["replay"])

    def shard(st, b):
        total, aux, grads = agent_lib.gradients(st, cfg, spaces, b, key, ac.DATA_AXIS)
        mean = jax.tree.map(lambda g: jax.lax.pmean(g, ac.DATA_AXIS), grads)
        new, outs, _ = agent_lib.apply_gradients(st, cfg, total, aux, grads, ac.DATA_AXIS)
        return new, dict(grads=mean, total=total, replay=outs["replay"])

    s1, a1 = jax.jit(one)(state, batch)
    s2, a2 = jax.jit(ac.data_parallel(shard, 2))(state, batch)
    leaves = lambda t: [np.asarray(x, np.float64) for x in jax.tree.leaves(t)]
    g1, g2 = leaves(a1["grads"]), [x[0] for x in leaves(a2["grads"])]
    scale = max(np.abs(g).max() for g in g1)
    res["grad_max_diff_rel"] = max(np.abs(x - y).max() for x, y in zip(g1, g2)) / scale
    res["grads_alike_on_devices"] = all(
        np.array_equal(x[0], x[1]) for x in leaves(a2["grads"]))
    res["total"] = [float(a1["total"]), [float(t) for t in np.asarray(a2["total"])]]
    rep2 = {k: np.concatenate(list(np.asarray(v)), 0) for k, v in a2["replay"].items()}
    res["replay_deter_max_diff"] = float(np.abs(rep2["deter"] - a1["replay"]["deter"]).max())
    res["replay_stoch_equal"] = bool(np.array_equal(rep2["stoch"], a1["replay"]["stoch"]))
    res["retnorm"] = [[float(s1.retnorm.low), float(s1.retnorm.high)],
                      [float(s2.retnorm.low), float(s2.retnorm.high)]]
    p1, p2 = leaves(s1.params), leaves(s2.params)
    res["param_max_diff"] = max(np.abs(x - y).max() for x, y in zip(p1, p2))
    res["param_diff_elems"] = int(sum((x != y).sum() for x, y in zip(p1, p2)))
    res["param_elems"] = int(sum(x.size for x in p1))
    res["lr"] = cfg.opt.lr

    # The normaliser's percentiles over every device's returns: those of the whole batch.
    x = jax.random.normal(jax.random.PRNGKey(1), (8, 15)) * 7.0
    rn0 = normalize.RetNormState(low=jnp.float32(-1.0), high=jnp.float32(3.0))
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("data",))
    gathered = jax.jit(jax.shard_map(
        lambda v: normalize.retnorm_update(rn0, v, cfg.retnorm, "data"), mesh=mesh,
        in_specs=P("data"), out_specs=P(), check_vma=False))(x)
    whole = normalize.retnorm_update(rn0, x, cfg.retnorm)
    res["retnorm_whole"] = [float(whole.low), float(whole.high)]
    res["retnorm_gathered"] = [float(gathered.low), float(gathered.high)]

    # A small run: 2 seeds over 2 devices x 2 data devices each.
    run_cfg = small_config()
    run_cfg = dataclasses.replace(run_cfg, run=dataclasses.replace(run_cfg.run,
                                                                  train_devices=(0, 1)))
    result = driver.train(run_cfg, (0, 1), os.path.join(out, "run"), devices=2,
                          progress=False)
    recs = result.records if hasattr(result, "records") else result
    res["records"] = [{k: r[k] for k in ("seed", "rows", "updates", "eval_returns")}
                      for r in recs]
    res["opt_loss"] = [r["train"]["opt_loss"] for r in recs]
    tr = make_trainer(make_plan(run_cfg, (0, 1), 2))
    st = tr.abstract_state()
    res["mesh"] = dict(tr.mesh.shape)
    res["replay_spec"] = [list(x.sharding.spec) for x in jax.tree.leaves(st.replay.data)][:1]
    res["agent_spec"] = sorted({json.dumps(list(x.sharding.spec))
                                for x in jax.tree.leaves(st.agent)})

    # A Gymnasium CartPole (host envs) seed on 2 data devices, when the extra is installed.
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        res["gym_records"] = None
    else:
        gym_cfg = small_config("gym_CartPole-v1")
        gym_cfg = dataclasses.replace(gym_cfg, run=dataclasses.replace(gym_cfg.run,
                                                                      train_devices=(0, 1)))
        result = driver.train(gym_cfg, (0,), os.path.join(out, "gym"), progress=False,
                              tensorboard=False)
        recs = result.records if hasattr(result, "records") else result
        res["gym_records"] = [{k: r[k] for k in ("seed", "rows", "updates", "eval_returns")}
                              for r in recs]
        res["gym_opt_loss"] = recs[-1]["train"]["opt_loss"]
    print(json.dumps(res))
""")


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return json_of_child(SCRIPT, TESTS, tmp_path_factory.mktemp("data_parallel"), devices=4)


def test_two_device_update_averages_the_whole_batch_gradient(result):
    assert result["device_count"] == 4
    assert result["grads_alike_on_devices"]  # the all-reduce gives every device one value
    # Only the order of the sums differs: the mean of two half-batch means against one mean.
    assert result["grad_max_diff_rel"] < 1e-4
    one, (d0, d1) = result["total"]
    assert (d0 + d1) / 2 == pytest.approx(one, rel=1e-5)
    assert d0 != d1  # each device's loss is its own half's


def test_two_device_update_writes_back_each_halfs_latents(result):
    assert result["replay_deter_max_diff"] < 1e-4
    assert result["replay_stoch_equal"]


def test_two_device_update_moves_the_parameters_alike(result):
    """LaProp's first step is lr * sign(g) for most elements, so an element whose gradient
    is near 0 can step the other way: at most 2 lr apart, and few such elements."""
    assert result["param_max_diff"] <= 2.05 * result["lr"]
    assert result["param_diff_elems"] < 0.01 * result["param_elems"]
    (l1, h1), (l2, h2) = result["retnorm"]
    assert l2 == pytest.approx(l1, rel=1e-5) and h2 == pytest.approx(h1, rel=1e-5)


def test_normaliser_percentiles_are_the_whole_batchs(result):
    assert result["retnorm_gathered"] == result["retnorm_whole"]


def test_two_seeds_by_two_data_devices_follow_the_schedule(result):
    recs = result["records"]
    assert [(r["seed"], r["rows"]) for r in recs] == [
        (s, rows) for rows in (80, 160, STEPS) for s in (0, 1)]
    assert all(r["updates"] == UPDATES[r["rows"]] for r in recs)
    assert all(math.isfinite(x) for r in recs for x in r["eval_returns"])
    assert all(x is None or math.isfinite(x) for x in result["opt_loss"])
    assert result["opt_loss"][-1] is not None


def test_gymnasium_cartpole_on_two_data_devices_follows_the_schedule(result):
    if result["gym_records"] is None:
        pytest.skip("gymnasium is not installed (pip install 'dreamerjax[gym]')")
    recs = result["gym_records"]
    assert [(r["seed"], r["rows"], r["updates"]) for r in recs] == [
        (0, rows, UPDATES[rows]) for rows in (80, 160, STEPS)]
    assert all(math.isfinite(x) for r in recs for x in r["eval_returns"])
    assert math.isfinite(result["gym_opt_loss"])


def test_state_lives_on_a_seed_by_data_mesh(result):
    assert result["mesh"] == {"seed": 2, "data": 2}
    assert result["replay_spec"] == [["seed", "data"]]
    assert result["agent_spec"] == ['["seed"]']
