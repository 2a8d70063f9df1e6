"""Pictures of a run: the world model's report, curves, videos."""
