"""run.seed_loop: seeds vmapped into one batched program, mapped one after another inside
it, or (threads) each seed's chunk its own 1-seed program on a host thread. The mapped and
threaded forms keep XLA:CPU off the grouped convolutions that vmapping per-seed CNN kernels
produces (results/bench/LOG.md), and each seed's numbers are its own either way (float32
rounding apart between vmap and the others; threads and map bitwise alike)."""

import jax
import numpy as np
import pytest

from dreamerjax.run import loop
from dreamerjax.run.plan import make_plan, plan_of_setup
from dreamerjax.run.trainers import make_trainer
from dreamerjax.tools import bench

# MinAtar's 10 x 10 frames with the two-stage CNN its geometry needs (as tests/test_bench).
# The batch and ring of the tests' small run (tests/_runs.py): one update of 4 x 16 rows
# (+1 context row) shows the layouts as well as the default's 16 x 64, at a sixteenth of
# the work.
IMAGE_SETS = ("task=gymnax_Breakout-MinAtar", "enc.simple.mults=[1,2]",
              "dec.simple.mults=[1,2]", "enc.simple.minres=5", "dec.simple.minres=5",
              "batch_size=4", "batch_length=17", "run.replay_capacity=64")


def _setup(how: str):
    return bench.make_setup(True, IMAGE_SETS + (f"run.seed_loop={how}",))


def test_auto_is_threads_on_cpu_and_explicit_values_stay():
    assert jax.default_backend() == "cpu"
    assert loop.seed_loop(_setup("auto")) == "threads"
    assert loop.seed_loop(_setup("threads")) == "threads"
    assert loop.seed_loop(_setup("vmap")) == "vmap"
    assert loop.seed_loop(_setup("map")) == "map"


def test_map_on_several_devices_is_refused():
    with pytest.raises(ValueError, match="run.seed_loop=map"):
        plan_of_setup(_setup("map"), (0, 1), 2)


def _lowered(how: str):
    """(the update program of two seeds of the tiny MinAtar agent in layout `how`, the
    states it starts from); program.lower(states) shows the layout without compiling."""
    setup = _setup(how)
    return bench.update_program(setup), bench.init_states(setup, 2)


def test_only_vmap_makes_grouped_convolutions():
    text = {}
    for how in ("vmap", "map"):
        program, states = _lowered(how)
        text[how] = program.lower(states).as_text()
    assert "feature_group_count = 2" in text["vmap"]
    assert "feature_group_count = 2" not in text["map"]
    assert "convolution" in text["map"]


# Compiling the vmapped CNN update is most of this module's time on a CPU. The default tier
# keeps the same question on the whole vector run: tests/test_devices.py compares two
# devices (seeds vmapped) with one device (seeds mapped) record by record.
@pytest.mark.slow
def test_both_layouts_give_each_seed_the_same_update():
    """One update of two seeds in both layouts from the same states."""
    updated = {}
    for how in ("vmap", "map"):
        program, states = _lowered(how)
        updated[how] = jax.device_get(program(states))
    a, b = updated["vmap"], updated["map"]
    assert int(a.updates[0]) == int(b.updates[0]) == 1
    # every array of the state: params, optimiser moments, replay, metric window
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)
    # the seeds themselves differ: a mapped seed does not read its neighbour's slice
    loss = b.window["ref"]["opt_loss"]
    assert np.isfinite(loss).all() and loss[0] != loss[1]


def test_threads_give_each_seed_the_mapped_programs_chunk():
    """run.seed_loop threads: the chunk run as the 1-seed program once per seed on host
    threads gives every seed the state and episode ends of the mapped program, bitwise,
    over a log interval without updates and one with 15; the precompile child compiles the
    1-seed program the run calls."""
    import _runs

    out = {}
    for how in ("map", "threads"):
        trainer = make_trainer(make_plan(_runs.small_config(seed_loop=how), (0, 1)))
        assert bool(trainer.threads) == (how == "threads")
        states, ends = trainer.init(), []
        for index in range(2):
            states, end = trainer.chunk(states, index)
            ends.append(end)
        out[how] = jax.device_get((states, ends))
        shapes = {x.shape[0] for x in jax.tree.leaves(
            trainer.chunk_input(trainer.abstract_state()))}
        assert shapes == ({1} if how == "threads" else {2})
    a, b = out["map"], out["threads"]
    assert int(b[0].updates[0]) == int(b[0].updates[1]) == _runs.UPDATES[160]
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    loss = b[0].window["ref"]["opt_loss"]  # the seeds themselves differ
    assert np.isfinite(loss).all() and loss[0] != loss[1]
