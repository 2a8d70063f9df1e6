"""dreamerjax: DreamerV3 in JAX, faithful to danijar/dreamerv3 @29eb964."""

__version__ = "0.1.0"
