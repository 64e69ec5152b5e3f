"""Evaluation: WattBot records and CSV files, answer normalisation, the score, voting."""
