"""dreamerjax: DreamerV3 in JAX, faithful to danijar/dreamerv3 @29eb964.

Importing the package changes nothing in the process; the command line applies the XLA:CPU
tuning of xla_tuning.py when it starts (Python users: call `xla_tuning.apply()` before
JAX starts its backend).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # dreamerjax.load_policy, imported on first use so that `import dreamerjax` stays light.
    if name == "load_policy":
        from dreamerjax.policy import load_policy

        return load_policy
    raise AttributeError(f"module 'dreamerjax' has no attribute {name!r}")
