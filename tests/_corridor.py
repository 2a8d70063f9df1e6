"""A JaxEnv for the tests of dreamerjax.register_env: walk right to 10, reward 1 there."""

import jax.numpy as jnp


class Corridor:
    obs_space = {"vector": ((1,), "float32")}
    num_actions = 2
    episode_limit = 30

    def reset(self, key):
        return jnp.int32(0), {"vector": jnp.zeros(1, jnp.float32)}

    def step(self, key, x, action):
        x = jnp.maximum(0, x + jnp.where(action == 1, 1, -1)).astype(jnp.int32)
        done = x == 10
        return x, {"vector": x[None].astype(jnp.float32)}, done.astype(jnp.float32), done
