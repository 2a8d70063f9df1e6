"""Suites written in JAX that step inside the compiled training program."""
