"""Benches of the faults stage (bench/README.md lists each)."""
