"""docs/scaling.md's table of the reference presets' replay at the reference's replay size
(replay.size 5e6 in both versions, capped by the run's steps as the reference's replay
never holds more rows than were collected), at the preset's model size and at 200m: each
row derived here from the run's own setup (run.memory's row schema), so the table cannot
drift from the code.

A row fits a card when what the card must hold of the replay is under the memory JAX's GPU
allocator takes by default (75 % of the card, XLA_PYTHON_CLIENT_MEM_FRACTION), the figure
run.memory's check reads as the device's limit (a TPU's allocator takes its whole memory:
the TPU v5e's 16 GiB, tools/accelerators.py): the whole replay with run.replay_memory
device, one sampled batch with host (the replay then needs as much host memory). The
model, its optimiser and the update's temporaries need room beside it, so "yes" is
necessary, not sufficient.
"""

from pathlib import Path

import pytest

from dreamerjax.config import resolve as config_resolve
from dreamerjax.config.defaults import REFERENCES
from dreamerjax.run import memory
from dreamerjax.run import setup as setup_lib
from dreamerjax.tools import accelerators

DOC = Path(__file__).parents[1] / "docs" / "scaling.md"
PRESETS = ("atari", "atari100k", "crafter", "dmc_vision", "dmc_proprio")
EXTRAS = {"atari": "ale_py", "atari100k": "ale_py", "crafter": "crafter",
          "dmc_vision": "dm_control", "dmc_proprio": "dm_control"}
CARDS_GB = (24, 40, 80)
PREALLOCATED = 0.75  # JAX's default GPU memory fraction
# The cards' memory for the replay: a GPU's preallocated part, a TPU v5e's whole memory.
CARDS = (*(PREALLOCATED * gb * 2**30 for gb in CARDS_GB),
         accelerators.known("TPU v5 lite").memory)
# The preset's own size (dreamerjax's default, or the preset's), and the reference's own
# default model (rssm.deter 8192 in both versions' configs.yaml), whose stored posterior
# latent makes most of a row.
SIZES = (None, "200m")


def table_row(reference: str, preset: str, size: str | None) -> str:
    """The docs table's line of a preset at a reference version and model size (None: the
    preset's own): the replay's bytes, then whether it fits each card with the replay in
    device memory (run.replay_memory device: the whole replay on the card) and with it in
    host memory (host: the card holds one sampled batch; the host holds the replay)."""
    config, _ = config_resolve.resolve(configs=[preset], reference=reference, size=size)
    setup = setup_lib.make_setup(config)
    need, batch = memory.replay_bytes(setup, 1), memory.batch_bytes(setup)
    fits = [["yes" if n <= card else "no" for card in CARDS] for n in (need, batch)]
    return (f"| `{preset}` | {reference} | {config.size} | "
            f"{setup.run.num_envs} x {setup.capacity:,} | "
            f"{memory.row_bytes(setup):,} | {memory.fmt(need)} | {memory.fmt(batch)} | "
            f"{' | '.join(fits[0])} | {' | '.join(fits[1])} |")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("preset", PRESETS)
def test_replay_table_row_is_in_the_docs(preset, reference, size):
    pytest.importorskip(EXTRAS[preset])
    row = table_row(reference, preset, size)
    assert row in DOC.read_text(), f"docs/scaling.md lacks (or has another) row:\n{row}"


if __name__ == "__main__":  # prints the table's rows
    for preset in PRESETS:
        for reference in REFERENCES:
            for size in SIZES:
                print(table_row(reference, preset, size))
