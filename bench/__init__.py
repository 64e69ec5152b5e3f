"""Benchmarks that print numbers, one folder per stage of the method (bench/README.md)."""
