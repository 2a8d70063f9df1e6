"""`dreamerjax demo` learns CartPole: three seeds, each to its end (slow tier, minutes each).

The default tier's tests/test_cli.py::test_demo_runs runs the command shortened on the
tiny network; this runs it as a newcomer does. results/demo_sweep/ has the sweep that
chose the demo's settings (cli_args.DEMO_RUN) and their evaluation returns on 5 seeds.
"""

import pytest

from dreamerjax.run.records import read_records
from dreamerjax.tools import args as cli_args
from dreamerjax.tools import cli


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_demo_learns_cartpole(seed, tmp_path, capsys):
    out = tmp_path / "demo"
    assert cli.main(["demo", "--seed", str(seed), "--out", str(out)]) == 0
    last = read_records(out)[-1]
    assert last["seed"] == seed and last["rows"] <= cli_args.DEMO_RUN["steps"]
    assert len(last["eval_returns"]) >= 5
    assert last["eval_mean"] >= cli.DEMO_LEARNED, last["eval_returns"]
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("CartPole learned:")
    assert (out / "curves.png").exists() and (out / "episode.mp4").exists()
