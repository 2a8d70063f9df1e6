"""dreamerjax: DreamerV3 in JAX, faithful to danijar/dreamerv3 @29eb964.

Importing the package changes nothing in the process; the command line applies the XLA:CPU
tuning of xla_tuning.py when it starts (Python users: call `xla_tuning.apply()` before
JAX starts its backend).
"""

__version__ = "0.1.0"
