"""Benches of the indexing stage (bench/README.md lists each)."""
