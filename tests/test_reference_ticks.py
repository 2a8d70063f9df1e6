"""benchmarks/reference_run/ticks.py: the harness's loop lands on every record point for
any env count, where the stock 10-transition pass (12 rows with 4 envs) skipped 2,000."""

import pytest
from _benchmarks import load

ticks = load("reference_run/ticks.py")


def _driver_rows(rows, steps, num_envs):
    """embodied's Driver.__call__(steps=...): whole vector steps of num_envs transitions
    until at least `steps` (driver.py:50-53, 87)."""
    return rows + num_envs * -(-steps // num_envs)


def _visited(total, num_envs, choose):
    rows, seen = 0, []
    while rows < total:
        rows = _driver_rows(rows, choose(rows), num_envs)
        seen.append(rows)
    return seen


@pytest.mark.parametrize("num_envs", [1, 3, 4, 16])
def test_every_record_point_is_landed_on(num_envs):
    every = 2000 if 2000 % num_envs == 0 else 2001
    seen = _visited(10 * every, num_envs,
                    lambda r: ticks.pass_steps(r, every, num_envs))
    assert [r for r in seen if r % every == 0] == [every * k for k in range(1, 11)]
    assert seen[-1] == 10 * every
    # never more rows in a pass than the stock one
    steps = [b - a for a, b in zip([0] + seen[:-1], seen, strict=True)]
    assert max(steps) == _driver_rows(0, ticks.STOCK_STEPS, num_envs)


def test_stock_pass_misses_with_four_envs():
    """Why the harness cuts passes: the stock pass with 4 envs lands on 6,000 and 18,000
    only, and steps past 20,000."""
    seen = _visited(20000, 4, lambda r: ticks.STOCK_STEPS)
    assert [r for r in seen if r % 2000 == 0] == [6000, 12000, 18000]
    assert seen[-1] == 20004


def test_stock_pass_kept_with_sixteen_envs():
    assert all(ticks.pass_steps(r, 2000, 16) == 10 for r in range(0, 2000, 16))


def test_misaligned_rows_are_refused():
    with pytest.raises(ValueError, match="num_envs 4"):
        ticks.pass_steps(6, 2000, 4)
