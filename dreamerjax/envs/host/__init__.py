"""Suites that step on the host (Python) beside the compiled updates."""
