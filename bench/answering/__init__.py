"""Benches of the answering stage (bench/README.md lists each)."""
