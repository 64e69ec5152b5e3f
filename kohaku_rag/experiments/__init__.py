"""Experiments: sweeps over config keys with seeds, their statistics, cost and reports (no Dagster)."""
