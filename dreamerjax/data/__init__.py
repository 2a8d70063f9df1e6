"""Rows and replay: the row schema, the replay buffer, the train-ratio schedule, the metric window.

Imports config/ and algo/."""
