"""Run the unmodified reference (danijar/dreamerv3 at 29eb964) on a ported gymnax task and
write a record set that `dreamerjax summary` and `dreamerjax compare` read.

docs/protocol.md section 3 is the specification; README.md here has the commands. Run in
the reference's venv with the checkout importable (PYTHONPATH or --checkout):

    python run_reference.py --seed 0 --rows 20000 --eval-every 2000 --eval-episodes 10 \
        --out OUT/ref_s0
    python run_reference.py --resume --out OUT/ref_s0

OUT/ref_sS then holds records.jsonl, episodes.jsonl, config.yaml, timing.json (when
finished), harness.json (the options), checkpoint.ckpt (the latest record point) and the
JSONL logger's metrics.jsonl / scores.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The harness's modules import each other by name, also when this file is run by its path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dmc_env import parse_env  # noqa: E402
from gymnax_ports import PORTS  # noqa: E402
from harness import VERSIONS, Harness, resolve_options  # noqa: E402
from run_reference_head import HeadHarness  # noqa: E402

HARNESSES = {"29eb964": Harness, "e3f0224": HeadHarness}


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the run directory (logdir)")
    p.add_argument("--resume", action="store_true",
                   help="continue OUT from its checkpoint (options come from harness.json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--env", default="pendulum",
                   help="a port of gymnax_ports.PORTS, or dmc_<domain>_<task>: the "
                        "reference's own DeepMind Control env (e3f0224 only; dmc_env.py)")
    p.add_argument("--configs", nargs="+", default=[], metavar="NAME",
                   help="named configs of the reference's configs.yaml applied after its "
                        "defaults, as its main.py's --configs (e3f0224 only; e.g. "
                        "dmc_proprio)")
    p.add_argument("--rows", type=int, default=20000, help="run.steps")
    p.add_argument("--eval-every", type=int, default=2000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--tiny", action="store_true", help="the debug config's widths (smoke)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a further reference config override (embodied flag syntax)")
    p.add_argument("--stop-after", type=int, default=0,
                   help="exit after the checkpoint at this record point (resume later)")
    p.add_argument("--checkout", default=None, help="the reference checkout (else PYTHONPATH)")
    p.add_argument("--version", default="29eb964", choices=VERSIONS,
                   help="the reference commit the checkout is at (e3f0224: "
                        "run_reference_head.py)")
    p.add_argument("--size", default="1m", choices=("1m", "12m", "25m", "50m"),
                   help="the model size (e3f0224: the reference's size<N> config; 29eb964: "
                        "1m only, the protocol's widths)")
    p.add_argument("--no-checkpoint", action="store_true",
                   help="write no checkpoint at the record points (a timed run: the "
                        "harness's checkpoints are not the reference's; no --resume)")
    p.add_argument("--blank-render", action="store_true",
                   help="a dmc_ env with images off renders nothing: its log/image, which "
                        "neither the agent nor the replay reads, is all zeros (no GL "
                        "library needed; dmc_env.BlankRender)")
    args = p.parse_args(argv)
    if args.resume:
        return args
    if args.size != "1m" and args.version != "e3f0224":
        p.error(f"--size {args.size}: 29eb964's harness has the protocol's 1m widths only")
    suite, _ = parse_env(args.env, PORTS)
    if args.blank_render and suite == "port":
        p.error(f"--blank-render: --env {args.env} renders nothing (a dmc_ env only)")
    if args.version != "e3f0224" and (suite != "port" or args.configs):
        p.error(f"--env {args.env} / --configs: the reference's own envs and named "
                "configs need --version e3f0224")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    opts = resolve_options(args)
    harness = HARNESSES[opts["version"]]
    return harness(opts, Path(args.out).resolve(), args.resume).run(args.stop_after)


if __name__ == "__main__":
    sys.exit(main())
