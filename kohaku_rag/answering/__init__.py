"""Answering: the query planner, the prompt and reference-constrained reply, configs,
the answers stored per config, cross-config ensembles and the leaderboard."""
