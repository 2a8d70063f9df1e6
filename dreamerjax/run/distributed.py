"""Multi-host runs: join jax.distributed before anything starts a JAX backend.

Importing dreamerjax.run.loop (through gymnax) already starts the backend, so call `start`
first: `from dreamerjax.run import distributed; distributed.start(...)`, then import the
driver and call `driver.train(...)` in every process. The CLI does this for `dreamerjax
train --distributed`. What the config means over several processes is the run's plan's
(run/plan.py processes_config): at e3f0224 each process's, as HEAD's; at 29eb964 the
whole run's, its devices counted over all processes (docs/scaling.md).
"""

from __future__ import annotations

import jax


def start(coordinator: str | None = None, num_processes: int | None = None,
          process_id: int | None = None) -> None:
    """Without arguments JAX detects the cluster (SLURM, Open MPI, Kubernetes, Cloud TPU);
    otherwise every process gets the same coordinator host:port and process count and its
    own id. The run's mesh then holds devices of every process (run/sharding.py run_mesh);
    process 0 writes the run directory, which all processes must share (records,
    checkpoints)."""
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)


# Gloo gives a new collective 30 s for every process to arrive; one process still compiling
# (minutes on a busy CPU) then fails the run. A coordination-service barrier with a long
# timeout in front of each host-side collective lines the processes up first.
BARRIER_TIMEOUT_S = 3 * 3600
_barriers = 0


def barrier(name: str, timeout_s: float = BARRIER_TIMEOUT_S) -> None:
    """Wait until every process of a multi-host run reaches this point (no-op in one)."""
    global _barriers
    if jax.process_count() <= 1:
        return
    from jax._src import distributed as jax_distributed

    client = jax_distributed.global_state.client
    if client is None:
        return
    _barriers += 1  # every process calls the same barriers in the same order
    client.wait_at_barrier(f"dreamerjax_{_barriers}_{name}", int(timeout_s * 1000))
