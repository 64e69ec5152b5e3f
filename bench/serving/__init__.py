"""Benches of the serving stage (bench/README.md lists each)."""
