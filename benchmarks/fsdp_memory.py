"""Per-device memory of one seed's training chunk with its agent state whole on every device
(jax.train_mesh N,1,1) against sharded over HEAD's FSDP axis (1,N,1; algo/fsdp.py), on
the same N devices (prints JSON; asserts nothing).

    python benchmarks/fsdp_memory.py [--size 200m] [--devices 2 4] [--meshes ...]
        [--num-envs 16] [--replay-capacity 128] [--out FILE]

The configuration is HEAD's (`--reference e3f0224`) at `--size` on CartPole-v1 (a vector
env: the agent state dominates, as it does for any env whose observations are small), with
jax.train_devices = [0 .. N-1], batch 16 x 64 split over all N devices, and a replay of
`--replay-capacity` rows per env (the replay splits over the devices alike in every mesh;
kept small so that the agent's share shows). Each case runs in a fresh worker process on N
mock CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=N): the run's own
Trainer (driver.make_trainer) lowers and compiles its chunk program (jit(shard_map(
run_chunk)), acting, replay and the updates owed, from the abstract state: nothing is
allocated), and the worker reports the compiled program's memory_analysis(): argument,
output, alias and temp bytes of one device's program, the agent state's bytes on device 0
(its leaves' shards, from the state's shardings) and whole, the parameter count, and the
compile seconds. Meshes default to N,1,1 and 1,N,1 (and 2,2,1 for N = 4).

Mock devices share one host's memory, so the figures are the program's own accounting
(what XLA's buffer assignment gives one device), not a measured peak.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _meshes(n: int) -> list[str]:
    out = [f"{n},1,1", f"1,{n},1"]
    return out + (["2,2,1"] if n == 4 else [])


def worker(size: str, n: int, mesh: str, num_envs: int, capacity: int) -> dict:
    """One case in this process (JAX started with n host devices)."""
    import jax
    import numpy as np

    from dreamerjax.config.resolve import make_config
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.trainers import make_trainer

    assert jax.device_count() >= n, (jax.device_count(), n)
    config = make_config("CartPole-v1", size=size, reference="e3f0224", num_envs=num_envs,
                         steps=num_envs * 64, eval_every=num_envs * 64,
                         replay_capacity=capacity, train_devices=tuple(range(n)),
                         train_mesh=mesh, seed_loop="vmap")
    trainer = make_trainer(make_plan(config, (0,)))
    state = trainer.abstract_state()
    t0 = time.time()
    lowered = trainer._chunk.lower(state, trainer.owed(0))
    compiled = lowered.compile()
    seconds = time.time() - t0
    mem = compiled.memory_analysis()
    dev = jax.devices()[0]

    def bytes_on_device0(tree):
        total = 0
        for x in jax.tree.leaves(tree):
            shape = x.sharding.shard_shape(x.shape)
            if dev in x.sharding.device_set:
                total += int(np.prod(shape)) * x.dtype.itemsize
        return total

    params = jax.tree.leaves(state.agent.params)
    return {
        "size": size, "devices": n, "mesh": mesh, "mesh_axes": dict(trainer.mesh.shape),
        "param_count": int(sum(int(np.prod(x.shape[1:])) for x in params)),
        "agent_state_bytes": int(sum(x.size * x.dtype.itemsize
                                     for x in jax.tree.leaves(state.agent))),
        "agent_state_bytes_device0": bytes_on_device0(state.agent),
        "state_bytes_device0": bytes_on_device0(state),
        "argument_size_in_bytes": int(mem.argument_size_in_bytes),
        "output_size_in_bytes": int(mem.output_size_in_bytes),
        "alias_size_in_bytes": int(mem.alias_size_in_bytes),
        "temp_size_in_bytes": int(mem.temp_size_in_bytes),
        "generated_code_size_in_bytes": int(mem.generated_code_size_in_bytes),
        "compile_s": round(seconds, 1),
    }


def _run_case(args, n: int, mesh: str) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = (f"{env.get('XLA_FLAGS', '')} "
                        f"--xla_force_host_platform_device_count={n}").strip()
    cmd = [sys.executable, __file__, "--worker", str(n), mesh, "--size", args.size,
           "--num-envs", str(args.num_envs), "--replay-capacity", str(args.replay_capacity)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        return {"devices": n, "mesh": mesh, "error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="200m")
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--meshes", nargs="+", default=None,
                        help="'d,f,t' meshes (default: N,1,1 and 1,N,1, and 2,2,1 for 4)")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--replay-capacity", type=int, default=128)
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        n, mesh = int(args.worker[0]), args.worker[1]
        print(json.dumps(worker(args.size, n, mesh, args.num_envs, args.replay_capacity)))
        return
    import platform

    cases, t0 = [], time.time()
    for n in args.devices:
        for mesh in args.meshes or _meshes(n):
            cases.append(_run_case(args, n, mesh))
            print(json.dumps(cases[-1]), file=sys.stderr, flush=True)
            result = {"size": args.size, "reference": "e3f0224", "env": "CartPole-v1",
                      "num_envs": args.num_envs, "replay_capacity": args.replay_capacity,
                      "machine": platform.processor() or platform.machine(),
                      "wall_s": round(time.time() - t0, 1), "cases": cases}
            if args.out:
                with open(args.out, "w") as f:
                    json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
