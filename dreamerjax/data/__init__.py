"""Rows and replay: the row schema, the replay buffer, the train-ratio schedule, the metric
window, and the replay's rows as files (chunks.py, replay_dir.py: numpy and files alone).

Imports config/ and algo/."""
