"""Benches of the retrieval stage (bench/README.md lists each)."""
