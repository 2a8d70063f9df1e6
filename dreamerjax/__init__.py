"""dreamerjax: DreamerV3 in JAX, faithful to danijar/dreamerv3 @29eb964.

    config = dreamerjax.make_config("CartPole-v1", steps=20000)
    result = dreamerjax.train(config, seeds=(0, 1, 2), out="runs/cartpole",
                              callbacks=[lambda point: print(point.rows)])
    action, state = result.policy(obs, seed=0)         # or dreamerjax.load_policy(out)
    dreamerjax.evaluate("runs/cartpole", episodes=10)  # or evaluate(result, seed=0)
    config = dreamerjax.load_config("runs/cartpole")   # to resume in a fresh process
    env_id = dreamerjax.register_env("Corridor-v0", Corridor)  # Gymnasium or dreamerjax.JaxEnv

Importing the package changes nothing in the process, and neither does `train` unless
asked: `train(..., settings=dreamerjax.cli_settings())`, called before JAX starts, sets up
the process as the command line does (XLA:CPU option, compilation cache, precompile child,
malloc trim).
"""

__version__ = "0.1.0"

# The Python API: name -> the module that defines it. Each is imported on first use, so
# that `import dreamerjax` stays light (no JAX until a name that needs it is used).
_API = {
    "train": "dreamerjax.run.driver",
    "TrainResult": "dreamerjax.run.result",
    "Callback": "dreamerjax.run.callbacks",
    "LogPoint": "dreamerjax.run.callbacks",
    "StopRequest": "dreamerjax.run.guard",
    "Settings": "dreamerjax.run.settings",
    "make_config": "dreamerjax.run.api",
    "Reference": "dreamerjax.config.defaults",
    "load_policy": "dreamerjax.run.policy",
    "evaluate": "dreamerjax.run.api",
    "load_config": "dreamerjax.run.api",
    "cli_settings": "dreamerjax.run.api",
    "register_env": "dreamerjax.envs.user",
    "JaxEnv": "dreamerjax.envs.user",
}

__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'dreamerjax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
