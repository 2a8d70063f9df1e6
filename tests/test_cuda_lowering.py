"""The run's programs lowered for CUDA on a machine without a GPU: a construct that XLA:CPU
alone can run (a host callback, a CPU-only primitive, an array placed on the CPU device
inside the program) fails here rather than on a user's first GPU run. Nothing is compiled:
lowering needs no GPU.

- The chunk (acting, replay, updates over one log interval) of the shared small gymnax
  CartPole run at HEAD (vector observations: MLP encoder), and its evaluation program.
- A tiny Craftax-Classic pixels run's chunk (image observations: the CNN encoder and
  decoder).
- The host path's programs (envs stepped on the CPU): act_and_insert (the policy and the
  replay insert), train_steps (the updates) and the evaluation's policy step, for the
  small Gymnasium CartPole run.
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


def host_programs(cfg) -> dict:
    """{name: (the jitted program, its abstract arguments)} of a 1-seed host run of cfg, as
    HostTrainer.chunk and .evaluate call them: the host's rows [seeds, envs, ...] as the
    collector emits them, the owed updates an int32 scalar."""
    from dreamerjax.algo import agent as agent_lib
    from dreamerjax.data import schema

    trainer = make_trainer(make_plan(cfg, (0,)))
    setup, states = trainer.setup, trainer.abstract_state()
    rows = schema.env_row_spec(setup.spaces, (1, setup.run.num_envs))
    eval_rows = schema.env_row_spec(setup.spaces, (1, setup.run.eval_episodes))
    carry = jax.eval_shape(lambda: jax.tree.map(lambda x: x[None], agent_lib.policy_initial(
        setup.config.agent, setup.spaces, setup.run.eval_episodes)))
    key = jax.ShapeDtypeStruct((1, 2), jnp.uint32)
    return {"act_and_insert": (trainer._act, (states, rows)),
            "train_steps": (trainer._train, (states, jax.ShapeDtypeStruct((), jnp.int32))),
            "eval_act": (trainer._eval_act[False], (states.agent.params, carry, eval_rows,
                                                    key))}


def cpu_custom_calls(text: str) -> list[str]:
    """Custom-call targets of lowered text that only XLA:CPU provides (LAPACK, DUCC FFTs,
    host callbacks)."""
    targets = re.findall(r"custom_call @([\w.]+)", text)
    return [t for t in targets if t.startswith(("lapack", "ducc", "cpu", "xla_ffi_python"))]


def test_cartpole_chunk_lowers_for_cuda():
    text = lower_for_cuda(*chunk_program(at_head(small_config("CartPole-v1"))))
    assert "stablehlo.while" in text  # the scan over ticks and the update loop
    assert cpu_custom_calls(text) == []


def test_cartpole_evaluation_lowers_for_cuda():
    """The compiled evaluation (a while_loop of policy and env steps per seed), as
    CompiledTrainer.evaluate calls it with the run's state's parameters."""
    cfg = at_head(small_config("CartPole-v1"))
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, seed_loop="vmap"))
    trainer = make_trainer(make_plan(cfg, (0,)))
    params = trainer.abstract_state().agent.params
    keys = jax.ShapeDtypeStruct((1, 2), jnp.uint32)
    text = lower_for_cuda(trainer._eval, (params, keys, False))
    assert "stablehlo.while" in text  # until every episode has ended
    assert cpu_custom_calls(text) == []


@pytest.fixture(scope="module")
def gym_cartpole_programs():
    pytest.importorskip("gymnasium")
    return host_programs(small_config("gym_CartPole-v1"))


@pytest.mark.parametrize("name", ["act_and_insert", "train_steps", "eval_act"])
def test_host_path_programs_lower_for_cuda(name, gym_cartpole_programs):
    program, args = gym_cartpole_programs[name]
    text = lower_for_cuda(program, args)
    assert cpu_custom_calls(text) == []
    if name == "train_steps":
        assert "stablehlo.while" in text  # the owed updates' loop


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
