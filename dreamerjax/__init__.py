"""dreamerjax: DreamerV3 in JAX, faithful to danijar/dreamerv3 @29eb964.

Importing the package changes nothing in the process; the command line applies the XLA:CPU
tuning of xla_tuning.py when it starts (Python users: call `xla_tuning.apply()` before
JAX starts its backend).
"""

__version__ = "0.1.0"


# The Python API, imported on first use so that `import dreamerjax` stays light.
_API = {"load_policy": "dreamerjax.run.policy", "make_config": "dreamerjax.config.defaults",
        "train": "dreamerjax.run.driver"}


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'dreamerjax' has no attribute {name!r}")
