"""Where one `dreamerjax` command's start-up goes, by JAX's own duration events: prints one
JSON object with the command's wall seconds and the events summed by name (tracing,
lowering to MLIR, XLA's backend compile, persistent-cache retrievals), each above 0.2 s.

    XDG_CACHE_HOME=$(mktemp -d) XLA_FLAGS="..." python benchmarks/compile_events.py \\
        train --tiny --steps 160 --no-precompile --out OUT/run

Run it twice on one XDG_CACHE_HOME for the cold and the cached start of the same program;
set XLA_FLAGS to compare XLA's options (docs/testing.md, the quick build's emitters).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    from jax import monitoring

    from dreamerjax.tools import cli

    events: dict[str, float] = collections.defaultdict(float)

    def listener(name: str, secs: float, **_) -> None:
        events[name.rsplit("/", 1)[-1]] += secs

    monitoring.register_event_duration_secs_listener(listener)
    t = time.perf_counter()
    code = cli.main(argv)
    wall = time.perf_counter() - t
    print(json.dumps({"command": ["dreamerjax", *argv], "rc": code, "wall_s": round(wall, 2),
                      "xla_flags": os.environ.get("XLA_FLAGS", ""),
                      "events_s": {k: round(v, 2) for k, v in sorted(events.items())
                                   if v > 0.2}}))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
