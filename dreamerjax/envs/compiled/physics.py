"""The part Brax and MuJoCo Playground share: envs with `reset(key) -> State` and
`step(State, action) -> State` (State: obs, reward, done, metrics), no auto-reset and no
time limit of their own (both leave those to training wrappers, which we do not use).

- action repeat: the action is applied `repeat` times and the rewards summed, stopping
  early on `done` (the reference's ActionRepeat, embodied/core/wrappers.py:39-55);
- `done` is a real termination (Brax's unhealthy ant, Playground's NaN physics);
- the time limit is ours: `episode_limit` agent steps, is_last without is_terminal;
- per-episode sums of the suite's step metrics (as Brax's evaluator reports them) are
  the episode keys `log_<metric>` (a '/' in a metric name becomes '_').
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.envs.core import EnvSpec, Step, box_bounds


def metric_keys(metrics: dict) -> tuple[tuple[str, str], ...]:
    return tuple((f"log_{k.replace('/', '_')}", "float32") for k in sorted(metrics))


def make_spec(*, suite: str, task: str, env, obs_size, low, high, repeat: int,
              episode_limit: int, metrics: dict) -> EnvSpec:
    """EnvSpec of a Brax-like env; obs_size an int (a vector observation)."""
    if not isinstance(obs_size, int | np.integer):
        raise ValueError(f"{suite}_{task}: observation {obs_size} is not one vector "
                         "(only proprioceptive tasks are supported)")
    if repeat < 1:
        raise ValueError(f"{suite} repeat must be >= 1, got {repeat}")
    if episode_limit < 1:
        raise ValueError(f"{suite}_{task}: episode_limit must be >= 1")
    dims = int(env.action_size)
    low, high = box_bounds(low, high, dims)
    names = sorted(metrics)
    keys = metric_keys(metrics)

    def reset(key):
        state = env.reset(key)
        sums = {k: jnp.zeros((), jnp.float32) for k in names}
        return (state, sums), {"vector": jnp.asarray(state.obs, jnp.float32)}

    def step(key, env_state, action, length):
        del key  # Brax and Playground steps are deterministic given the state
        state, sums = env_state

        def sub(carry, _):
            st, reward, done, sums = carry
            nxt = env.step(st, action)
            keep = lambda a, b: jnp.where(done, a, b)  # noqa: E731
            st = jax.tree.map(keep, st, nxt)
            reward = reward + jnp.where(done, 0.0, jnp.asarray(nxt.reward, jnp.float32))
            sums = {k: sums[k] + jnp.where(done, 0.0, jnp.asarray(nxt.metrics[k], jnp.float32))
                    for k in names}
            return (st, reward, done | (nxt.done > 0), sums), None

        init = (state, jnp.zeros((), jnp.float32), jnp.zeros((), bool), sums)
        (state, reward, done, sums), _ = jax.lax.scan(sub, init, None, length=repeat)
        return Step(env_state=(state, sums), obs={"vector": jnp.asarray(state.obs, jnp.float32)},
                    reward=reward, terminated=done, truncated=length >= episode_limit,
                    stats={k: sums[n] for (k, _), n in zip(keys, names, strict=True)})

    return EnvSpec(
        env_id=f"{suite}_{task}", suite=suite, task=task,
        obs_space=(("vector", (int(obs_size),), "float32"),), discrete=False,
        num_actions=0, action_dims=dims, action_low=low, action_high=high,
        episode_limit=int(episode_limit), reset=reset, step=step, env_action_shape=(dims,),
        episode_keys=keys, env=env)
