"""The run's chunk program (acting, replay, updates over one log interval) lowered for CUDA
on a machine without a GPU: a construct that XLA:CPU alone can run (a host callback, a
CPU-only primitive, an array placed on the CPU device inside the program) fails here
rather than on a user's first GPU run. Nothing is compiled: lowering needs no GPU.

- The shared small gymnax CartPole run at HEAD (vector observations: MLP encoder).
- A tiny Craftax-Classic pixels run (image observations: the CNN encoder and decoder).
- The check itself: a CPU-only primitive (Schur decomposition) is refused the same way,
  and a CPU library call (LAPACK) in lowered text is found.
"""

import dataclasses
import re

import jax
import jax.numpy as jnp
import pytest
from _runs import at_head, small_config

from dreamerjax.run.plan import make_plan
from dreamerjax.run.trainers import make_trainer


def chunk_program(cfg):
    """(the jitted chunk program of a 1-seed run of cfg, its abstract arguments) as the
    run's own trainer builds them, with the seeds vmapped as on an accelerator (XLA:CPU
    resolves run.seed_loop 'auto' to host threads)."""
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, seed_loop="vmap"))
    trainer = make_trainer(make_plan(cfg, (0,)))
    return trainer._chunk, (trainer.abstract_state(), trainer.owed(1))


def lower_for_cuda(program, args) -> str:
    return program.trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def cpu_custom_calls(text: str) -> list[str]:
    """Custom-call targets of lowered text that only XLA:CPU provides (LAPACK, DUCC FFTs,
    host callbacks)."""
    targets = re.findall(r"custom_call @([\w.]+)", text)
    return [t for t in targets if t.startswith(("lapack", "ducc", "cpu", "xla_ffi_python"))]


def test_cartpole_chunk_lowers_for_cuda():
    text = lower_for_cuda(*chunk_program(at_head(small_config("CartPole-v1"))))
    assert "stablehlo.while" in text  # the scan over ticks and the update loop
    assert cpu_custom_calls(text) == []


def test_image_chunk_lowers_for_cuda():
    pytest.importorskip("craftax")
    cfg = small_config("craftax_Craftax-Classic-Pixels-v1")
    program, args = chunk_program(cfg)
    image = args[0].replay.data["obs"]["image"]
    assert image.dtype == jnp.uint8 and image.shape[-1] == 3
    text = lower_for_cuda(program, args)
    assert "stablehlo.convolution" in text
    assert cpu_custom_calls(text) == []


def test_a_cpu_only_construct_is_refused():
    x = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    with pytest.raises(NotImplementedError, match="not found for platform cuda"):
        lower_for_cuda(jax.jit(lambda a: jax.scipy.linalg.schur(a)[0]), (x,))
    # and a CPU library call, as the CPU lowering writes it, is named
    on_cpu = jax.jit(jnp.linalg.inv).trace(x).lower(lowering_platforms=("cpu",)).as_text()
    assert cpu_custom_calls(on_cpu)
