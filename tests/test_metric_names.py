"""The metric names a run's window is made of (agent.metric_names: from the config and the
spaces, nothing traced) are the names agent.update returns: for each reference version and
each kind of space (vector observations with discrete actions, images, continuous
actions), and with the replay critic's loss off."""

import dataclasses

import jax
import pytest
from _runs import at_head, small_config

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.defaults import HEAD_REF, REF_29EB964
from dreamerjax.data import schema
from dreamerjax.run import loop
from dreamerjax.run import plan as plan_lib

# env, 29eb964's CNN geometry, HEAD's CNN stages (MinAtar's 10 x 10 images take their own)
KINDS = {
    "vector": ("CartPole-v1", {}, None),
    "image": ("gymnax_Breakout-MinAtar", dict(cnn_mults=(1, 2), cnn_minres=5), (4,)),
    "continuous": ("Pendulum-v1", {}, None),
}


def _setup(kind: str, reference: str, **agent):
    env, geometry, head_mults = KINDS[kind]
    cfg = small_config(env, **geometry)
    if reference == HEAD_REF:
        cfg = at_head(cfg, head_mults)
    if agent:
        cfg = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, **agent))
    return plan_lib.make_plan(cfg, (0,)).setup


def _traced_names(setup) -> tuple[str, ...]:
    """The keys of the metrics agent.update returns, by tracing it (no compile)."""
    cfg, spaces, run = setup.config.agent, setup.spaces, setup.run
    key = jax.random.PRNGKey(0)
    state = jax.eval_shape(lambda k: agent_lib.init(k, cfg, spaces), key)
    batch = schema.batch_spec(spaces, cfg.rssm.deter, cfg.rssm.stoch, run.batch_size,
                              setup.window_length)
    _, _, mets = jax.eval_shape(lambda s, b, k: agent_lib.update(s, cfg, spaces, b, k),
                                state, batch, key)
    return tuple(sorted(mets))


@pytest.mark.parametrize("reference", [REF_29EB964, HEAD_REF])
@pytest.mark.parametrize("kind", list(KINDS))
def test_metric_names_are_the_updates(kind, reference):
    setup = _setup(kind, reference)
    traced = _traced_names(setup)
    assert loop.metric_names(setup) == traced
    # the kinds differ where the names do: HEAD's rand/action is the discrete policy's; an
    # image key has a loss of its own
    if reference == HEAD_REF:
        assert ("rand/action" in traced) == (kind != "continuous")
    assert bool(setup.spaces.dec_image_keys) == (kind == "image")
    assert all(f"{k}_loss" in traced for k in setup.spaces.dec_keys)


@pytest.mark.parametrize("reference", [REF_29EB964, HEAD_REF])
def test_metric_names_without_the_replay_critic(reference):
    setup = _setup("vector", reference, replay_critic_loss=False)
    traced = _traced_names(setup)
    assert not any("replay" in n or "repval" in n for n in traced)
    assert agent_lib.metric_names(setup.config.agent, setup.spaces) == traced
