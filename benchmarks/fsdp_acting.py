"""What one env tick's acting gathers under HEAD's FSDP axis (jax.train_mesh 1,f,1): the
all-gathers of the compiled acting program, their bytes per device, split by top-level
parameter group (prints JSON; asserts nothing).

    python benchmarks/fsdp_acting.py [--size 12m] [--devices 2] [--num-envs 16] [--out FILE]

The configuration is HEAD's (`--reference e3f0224`) at `--size` on CartPole-v1, one seed
on `--devices` train devices as mesh 1,N,1 (every device an FSDP slice). A worker process
on N mock CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=N) builds the
run's own trainer (driver.make_trainer) and the acting part of one tick of its chunk:
jit(shard_map(loop.act_and_store)) over the trainer's mesh and state layout, the policy
on every env's row, the row stored, the envs stepped. It lowers and compiles that program
from the abstract state (nothing allocated) and reads the all-gather instructions of
both texts: the lowered program (what the code asks for) and the compiled one (what XLA
keeps after removing dead code). Each gather's output is a whole leaf on every device;
a device receives (f - 1) / f of it.

The groups' `split_bytes` come from the parameters' shapes and the split rule
(algo/fsdp.py): the bytes of every split leaf of the group, whole. `asked_bytes_per_tick`
and `asked_leaves` are the all_gathers of the traced program as the code asks for them
(loop.acting_params; nothing removed yet); `kept_bytes_per_tick` and `kept_leaves` are
what the program keeps: the gathers left after dead-code elimination of the traced
program (the same elimination lowering applies: the lowered and compiled programs hold as
many all_gathers, of as many bytes). `policy_groups` are the groups agent.policy reads
(enc, dyn, actor). `chunk_lowered_all_gathers` counts the all_gathers of the whole lowered
chunk program (acting and updates), to compare with the split leaves' count (one gather
each for the loss) plus the acting program's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

POLICY_GROUPS = ("enc", "dyn", "actor")  # agent.policy's reads of params
_DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "f64": 8, "s8": 1,
                "u8": 1, "pred": 1}
_SHAPE = re.compile(r"\b(" + "|".join(_DTYPE_BYTES) + r")\[([0-9,]*)\]")


def all_gathers_hlo(text: str) -> list[int]:
    """Output bytes of each all-gather instruction of compiled HLO text (a combined
    gather's tuple counted whole)."""
    out = []
    for line in text.splitlines():
        m = re.search(r"=\s*(.+?)\s+all-gather\(", line)
        if m:
            out.append(sum(_DTYPE_BYTES[d] * math.prod(int(x) for x in dims.split(",") if x)
                           for d, dims in _SHAPE.findall(m.group(1))))
    return out


def all_gathers_stablehlo(text: str) -> list[tuple[tuple[int, ...], int]]:
    """(output shape, output bytes) of each all_gather op of lowered StableHLO text."""
    out = []
    dtypes = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "ui32": 4, "f64": 8}
    for line in text.splitlines():
        if "stablehlo.all_gather" not in line:
            continue
        result = line.rsplit("->", 1)[-1]
        for dims, dt in re.findall(r"tensor<([0-9x]+)x(f32|bf16|f16|i32|ui32|f64)>", result):
            shape = tuple(int(x) for x in dims.split("x"))
            out.append((shape, dtypes[dt] * math.prod(shape)))
    return out


def kept_gathers(program, state, dce: bool = True) -> dict[str, int]:
    """{leaf path: whole bytes} of the all_gathers that survive dead-code elimination in
    the shard_map body of `program` (jit(shard_map(f))) traced on `state`: the leaves the
    computation really gathers. Lowering applies the same elimination (the lowered
    program's gathers match these in count and bytes). dce=False: every all_gather the
    traced body holds, as the code asks for them."""
    import jax
    from jax._src.interpreters import partial_eval as pe  # dce_jaxpr: no public name

    leaves, _ = jax.tree_util.tree_flatten_with_path(state)
    paths = [jax.tree_util.keystr(p) for p, _ in leaves]
    inner = jax.make_jaxpr(program)(state).jaxpr.eqns[0].params["jaxpr"].jaxpr
    (smap,) = [e for e in inner.eqns if e.primitive.name == "shard_map"]
    body = smap.params["jaxpr"]
    live, used = pe.dce_jaxpr(body, [True] * len(body.outvars)) if dce else (
        body, [True] * len(body.invars))
    outer_of = dict(zip(live.invars, [v for v, u in zip(smap.invars, used, strict=True) if u],
                        strict=True))
    index = {v: i for i, v in enumerate(inner.invars)}
    out = {}
    for e in live.eqns:
        if e.primitive.name == "all_gather":
            path = paths[index[outer_of[e.invars[0]]]]
            out[path] = int(e.outvars[0].aval.size * e.outvars[0].aval.dtype.itemsize)
    return out


def worker(size: str, n: int, num_envs: int) -> dict:
    """One case in this process (JAX started with n host devices)."""
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    from dreamerjax.algo import agent as agent_lib
    from dreamerjax.algo import fsdp as fsdp_lib
    from dreamerjax.config.resolve import make_config
    from dreamerjax.run import loop
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer

    assert jax.device_count() >= n, (jax.device_count(), n)
    mesh_spec = f"1,{n},1"
    config = make_config("CartPole-v1", size=size, reference="e3f0224", num_envs=num_envs,
                         steps=num_envs * 128, eval_every=num_envs * 128, replay_capacity=128,
                         train_devices=tuple(range(n)), train_mesh=mesh_spec,
                         seed_loop="vmap")
    trainer = make_trainer(make_plan(config, (0,)))
    setup, state = trainer.setup, trainer.abstract_state()

    def tick(st):
        return loop.over_seeds(setup, lambda s: loop.act_and_store(setup, s), st)

    ends = P("seed", (loop.DATA_AXIS, fsdp_lib.FSDP_AXIS))
    program = jax.jit(jax.shard_map(tick, mesh=trainer.mesh, in_specs=(trainer.specs,),
                                    out_specs=(trainer.specs, ends), check_vma=False))
    t0 = time.time()
    lowered = program.trace(state).lower()
    compiled = lowered.compile()
    seconds = time.time() - t0
    lowered_gathers = all_gathers_stablehlo(lowered.as_text())
    compiled_gathers = all_gathers_hlo(compiled.as_text())
    # The whole chunk (acting inside the scan over ticks, then the updates owed), lowered
    # only: its gathers are the update's plus whatever acting keeps there.
    chunk_gathers = all_gathers_stablehlo(
        trainer._chunk.trace(state, trainer.owed(0)).lower().as_text())

    fsdp = loop.fsdp_layout(setup)
    slices = agent_lib.param_slices(setup.config.agent, setup.spaces, fsdp)
    groups = {}
    for name, sub in state.agent.params.items():
        dims = jax.tree.leaves(slices.dims[name])
        leaves = jax.tree.leaves(sub)
        split = [x for x, k in zip(leaves, dims, strict=True) if k != fsdp_lib.REPLICATED]
        whole = sum(x.size * x.dtype.itemsize for x in leaves)
        gathered = sum(x.size * x.dtype.itemsize for x in split)
        groups[name] = {"param_bytes": int(whole), "split_leaves": len(split),
                        "leaves": len(leaves), "split_bytes": int(gathered),
                        "policy_reads": name in POLICY_GROUPS}
    kept, asked = kept_gathers(program, state), kept_gathers(program, state, dce=False)
    for name, g in groups.items():
        for what, found in (("asked", asked), ("kept", kept)):
            g[f"{what}_leaves"] = sorted(
                p for p in found if p.startswith(f".agent.params['{name}']"))
            g[f"{what}_bytes_per_tick"] = int(sum(found[p] for p in g[f"{what}_leaves"]))
        g["received_bytes_per_tick"] = int(g["kept_bytes_per_tick"] * (n - 1) // n)
    params = jax.tree.leaves(state.agent.params)
    split = sum(g["split_bytes"] for g in groups.values())
    needed = sum(g["split_bytes"] for k, g in groups.items() if k in POLICY_GROUPS)
    return {
        "size": size, "devices": n, "mesh": mesh_spec, "mesh_axes": dict(trainer.mesh.shape),
        "num_envs": num_envs,
        "param_count": int(sum(int(np.prod(x.shape[1:])) for x in params)),
        "groups": groups,
        "split_bytes": int(split),
        "policy_groups": list(POLICY_GROUPS),
        "policy_groups_bytes": int(needed),
        "asked_all_gathers": len(asked),
        "asked_bytes_per_tick": int(sum(asked.values())),
        "lowered_all_gathers": len(lowered_gathers),
        "lowered_all_gather_bytes": int(sum(b for _, b in lowered_gathers)),
        "kept_bytes_per_tick": int(sum(kept.values())),
        "compiled_all_gathers": len(compiled_gathers),
        "compiled_all_gather_bytes": int(sum(compiled_gathers)),
        "chunk_lowered_all_gathers": len(chunk_gathers),
        "compile_s": round(seconds, 1),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="12m")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.size, args.devices, args.num_envs)))
        return
    import platform

    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = (f"{env.get('XLA_FLAGS', '')} "
                        f"--xla_force_host_platform_device_count={args.devices}").strip()
    t0 = time.time()
    cmd = [sys.executable, __file__, "--worker", "--size", args.size,
           "--devices", str(args.devices), "--num-envs", str(args.num_envs)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(proc.stderr[-4000:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update(reference="e3f0224", env="CartPole-v1",
                  machine=platform.processor() or platform.machine(),
                  wall_s=round(time.time() - t0, 1))
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
