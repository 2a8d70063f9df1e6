"""How many transitions the harness's loop asks of the driver per pass (no embodied import,
so tests/test_reference_ticks.py runs in our venv).

The reference's loop asks for `steps=10` (embodied/run/train.py:109). embodied's driver
steps all envs together and counts every env's transition (embodied/core/driver.py:50-53,
87), so one pass adds num_envs * ceil(10 / num_envs) rows: 16 with 16 envs, but 12 with
4, and 12 never lands on 2,000. The tick only decides when the loop body runs (training
happens per transition inside the driver, train.py:81-92), so the harness shortens the
pass that would overshoot a record point and lands on every multiple of `every` exactly.
"""

from __future__ import annotations

STOCK_STEPS = 10  # train.py:109


def pass_steps(rows: int, every: int, num_envs: int) -> int:
    """The `steps` for the driver's next pass from `rows`: the stock 10, cut to the rows
    left before the next multiple of `every` (rows and every are multiples of num_envs)."""
    if rows % num_envs or every % num_envs:
        raise ValueError(f"rows {rows} and every {every} must be multiples of "
                         f"num_envs {num_envs}")
    left = every - rows % every
    return min(STOCK_STEPS, left)

