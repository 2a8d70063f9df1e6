"""Multi-host runs: join jax.distributed before anything starts a JAX backend.

Importing dreamerjax.loop (through gymnax) already starts the backend, so call `start`
first: `from dreamerjax import distributed; distributed.start(...)`, then import the loop
and call `loop.train(..., devices=N)` with N the devices of all processes. The CLI does this
for `dreamerjax train --distributed`.
"""

from __future__ import annotations

import jax


def start(coordinator: str | None = None, num_processes: int | None = None,
          process_id: int | None = None) -> None:
    """Without arguments JAX detects the cluster (SLURM, Open MPI, Kubernetes, Cloud TPU);
    otherwise every process gets the same coordinator host:port and process count and its
    own id. The seed mesh then spans the devices of all processes; process 0 writes the run
    directory, which all processes must share (records, checkpoints)."""
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)
