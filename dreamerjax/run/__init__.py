"""Running a training run: the per-seed loop functions (loop.py), the setup that chooses
the compiled or the host trainer, the driver (log points, callbacks, resume), checkpoints,
records, the run lock and the precompile child.

Imports config/, algo/, data/ and envs/; never viz/ or tools/.
"""
