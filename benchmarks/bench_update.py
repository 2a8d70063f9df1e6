"""Time the 1m CartPole update: `python benchmarks/bench_update.py [--seeds 1 3] [--updates 50]`.

The same as `dreamerjax bench --json ...` (dreamerjax/tools/bench/): prints one JSON
object; `--out DIR` also writes DIR/bench_<backend>_<date>.json and DIR/README.md.
"""

import sys

from dreamerjax.tools import cli

if __name__ == "__main__":
    argv = sys.argv[1:]
    sys.exit(cli.main(["bench", *(["--json"] if "--json" not in argv else []), *argv]))
