"""`dreamerjax bench --set reference=e3f0224` benches e3f0224's agent, as `train
--reference e3f0224` resolves it (the same-chip side by side times that version)."""

from __future__ import annotations

from dreamerjax.config.resolve import make_config
from dreamerjax.tools.args import _check_bench_sets
from dreamerjax.tools.bench.options import ENV, Options
from dreamerjax.tools.bench.programs import point_config


def test_a_version_set_is_accepted_and_benched():
    sets = ("reference=e3f0224", "jax.compute_dtype=bfloat16")
    _check_bench_sets(sets)  # no "give the version once" refusal
    config, _ = point_config(Options(set=sets), "12m")
    expected = make_config(ENV, size="12m", reference="e3f0224", check=False,
                           sets=("jax.compute_dtype=bfloat16",))
    assert config.agent == expected.agent
    assert config.agent.reference == "e3f0224"
    assert config.agent != make_config(ENV, size="12m", check=False,
                                       sets=("jax.compute_dtype=bfloat16",)).agent


def test_the_profiled_setup_takes_the_version_too():
    from dreamerjax.tools.bench.programs import make_setup
    setup = make_setup(False, ("reference=e3f0224",), size="1m")
    assert setup.config.agent.reference == "e3f0224"
