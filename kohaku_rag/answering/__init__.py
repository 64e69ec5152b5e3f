"""Answering: the query planner, the prompt and reference-constrained reply, configs,
the answers stored per config and cross-config ensembles."""
