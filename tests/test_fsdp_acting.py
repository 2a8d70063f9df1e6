"""Acting under HEAD's FSDP axis (jax.train_mesh 1,2,1; algo/fsdp.py) gathers only the
parameters the policy reads, on 2 forced host devices in a child interpreter.

The acting part of one tick of the run's own chunk (jit of shard_map over the trainer's
mesh and state layout: loop.act_and_store, the policy on every env's row) and the host
path's acting program (host_loop.act_and_insert) are traced, lowered and compiled from
the abstract state. Their all-gathers, as the code asks for them (the traced program,
before any dead code is removed) and as XLA keeps them (the compiled program), total the
bytes of the policy's split parameters: the leaves that agent.policy computes with (found
from its own traced program: the parameters its operations read), whole. Not the whole
tree's: the decoder, the reward and continue heads, the critic and the RSSM's prior
layers stay in slices. Evaluation's program gathers the same bytes once, before its loop.
"""

import textwrap
from pathlib import Path

import pytest
from _xla import json_of_child

TESTS = Path(__file__).parent

SCRIPT = textwrap.dedent("""
    import dataclasses, json, sys
    import numpy as np
    import jax
    from jax.sharding import PartitionSpec as P
    sys.path.insert(0, sys.argv[1])
    from dreamerjax.algo import agent as agent_lib, fsdp as fsdp_lib
    from dreamerjax.data import schema
    from dreamerjax.run import host_loop, loop
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer
    from _benchmarks import load
    from _runs import at_head, small_config

    bench = load("fsdp_acting.py")

    def trainer_of(env):
        cfg = at_head(small_config(env))
        cfg = dataclasses.replace(cfg, run=dataclasses.replace(
            cfg.run, train_devices=(0, 1), train_mesh="1,2,1", seed_loop="vmap"))
        return make_trainer(make_plan(cfg, (0,)))

    def one_seed(tree):
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), tree)

    def policy_reads(setup, params, carry, row):
        # The parameter leaves (by path) that agent.policy's operations read.
        cfg, spaces = setup.config.agent, setup.spaces
        key = jax.ShapeDtypeStruct((2,), np.uint32)
        closed = jax.make_jaxpr(lambda p, c, o, f, k: agent_lib.policy(
            p, cfg, spaces, c, o, f, k))(params, carry, row["obs"], row["is_first"], key)
        jaxpr = closed.jaxpr
        read = {id(v) for e in jaxpr.eqns for v in e.invars} | {id(v) for v in jaxpr.outvars}
        paths = [jax.tree_util.keystr(p) for p, _ in
                 jax.tree_util.tree_flatten_with_path(params)[0]]
        return {p for p, v in zip(paths, jaxpr.invars) if id(v) in read}

    def split_bytes(setup, params, only=None):
        # Whole bytes of the split leaves of params (of those in `only` when given).
        fsdp = loop.fsdp_layout(setup)
        dims = agent_lib.param_slices(setup.config.agent, setup.spaces, fsdp).dims
        total, count = 0, 0
        for (path, x), k in zip(jax.tree_util.tree_flatten_with_path(params)[0],
                                jax.tree.leaves(dims)):
            if k != fsdp_lib.REPLICATED and (only is None or jax.tree_util.keystr(path) in only):
                total += x.size * x.dtype.itemsize
                count += 1
        return total, count

    def traced_gathers(traced):
        # (count, output bytes) of the all_gathers of a traced program, every sub-program
        # included, nothing removed.
        found = []
        def walk(jaxpr):
            for e in jaxpr.eqns:
                if e.primitive.name == "all_gather":
                    a = e.outvars[0].aval
                    found.append(a.size * a.dtype.itemsize)
                for v in e.params.values():
                    for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                        inner = getattr(sub, "jaxpr", sub)
                        if hasattr(inner, "eqns"):
                            walk(inner)
        walk(traced.jaxpr.jaxpr)
        return len(found), sum(found)

    def measure(program, *args):
        traced = program.trace(*args)
        lowered = traced.lower()
        compiled = bench.all_gathers_hlo(lowered.compile().as_text())
        count, nbytes = traced_gathers(traced)
        return {"traced": [count, nbytes], "compiled_bytes": sum(compiled),
                "lowered_bytes": sum(b for _, b in bench.all_gathers_stablehlo(lowered.as_text()))}

    res = {"device_count": jax.device_count()}
    trainer = trainer_of("CartPole-v1")
    setup, state = trainer.setup, trainer.abstract_state()
    res["mesh"] = dict(trainer.mesh.shape)
    params = one_seed(state.agent.params)
    reads = policy_reads(setup, params, one_seed(state.carry), one_seed(state.row))
    res["policy_reads"] = sorted(reads)
    res["policy_split"] = split_bytes(setup, params, reads)
    res["whole_split"] = split_bytes(setup, params)

    def tick(st):
        return loop.over_seeds(setup, lambda s: loop.act_and_store(setup, s), st)

    ends = P("seed", (loop.DATA_AXIS, fsdp_lib.FSDP_AXIS))
    act = jax.jit(jax.shard_map(tick, mesh=trainer.mesh, in_specs=(trainer.specs,),
                                out_specs=(trainer.specs, ends), check_vma=False))
    res["act"] = measure(act, state)

    # Evaluation: the policy's slices gathered once, in front of its while loop.
    keys = jax.ShapeDtypeStruct((1, 2), np.uint32)
    res["eval"] = measure(trainer._eval, state.agent.params, keys, False)

    # The host path's acting program (host envs' rows in, actions out).
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        res["host"] = None
    else:
        host = trainer_of("gym_CartPole-v1")
        hstate = host.abstract_state()
        envs = P("seed", (loop.DATA_AXIS, fsdp_lib.FSDP_AXIS))
        on_envs = jax.sharding.NamedSharding(host.mesh, envs)
        rows = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_envs),
            schema.env_row_spec(host.setup.spaces, (1, host.setup.run.num_envs)))

        def host_act(st, r):
            return loop.over_seeds(
                host.setup, lambda s, x: host_loop.act_and_insert(host.setup, s, x), st, r)

        program = jax.jit(jax.shard_map(host_act, mesh=host.mesh,
                                        in_specs=(host.specs, envs),
                                        out_specs=(host.specs, envs), check_vma=False))
        res["host"] = measure(program, hstate, rows)
    print(json.dumps(res))
""")


@pytest.fixture(scope="module")
def result():
    return json_of_child(SCRIPT, TESTS, devices=2)


def test_policy_reads_encoder_posterior_and_actor(result):
    assert result["device_count"] == 2
    assert result["mesh"] == {"seed": 1, "data": 1, "fsdp": 2}
    groups = {p.split("'")[1] for p in result["policy_reads"]}
    assert groups == {"enc", "dyn", "actor"}
    assert not [p for p in result["policy_reads"] if "['img" in p]  # the prior's layers


def test_acting_gathers_only_the_policys_parameters(result):
    """As asked for (traced) and as kept (lowered, compiled): one all_gather per split
    leaf the policy reads, of its whole bytes; well under the whole tree's."""
    policy_bytes, policy_leaves = result["policy_split"]
    whole_bytes, _ = result["whole_split"]
    assert 0 < policy_bytes < 0.8 * whole_bytes
    act = result["act"]
    assert act["traced"] == [policy_leaves, policy_bytes]
    assert act["lowered_bytes"] == act["compiled_bytes"] == policy_bytes


def test_evaluation_gathers_only_the_policys_parameters(result):
    assert result["eval"]["compiled_bytes"] == result["policy_split"][0]


def test_host_acting_gathers_only_the_policys_parameters(result):
    host = result["host"]
    if host is None:
        pytest.skip("gymnasium is not installed (pip install 'dreamerjax[gym]')")
    policy_bytes, policy_leaves = result["policy_split"]
    assert host["traced"] == [policy_leaves, policy_bytes]
    assert host["compiled_bytes"] == policy_bytes
