"""The compile worker of `dreamerjax bench` (programs._run_worker runs `python -m
dreamerjax.tools.bench --compile-worker SPEC`): the run's chunk and init compiled in a fresh
process against a persistent cache; its figures are the last line of stdout."""

import json
import sys

from dreamerjax.tools.bench.programs import compile_worker

if __name__ == "__main__":
    # XLA_FLAGS come from the parent's environment.
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        spec = json.loads(sys.argv[2])
        print(json.dumps(compile_worker(spec["cache"], spec["config"], spec["seed_counts"])))
        sys.exit(0)
