"""Evaluation, above answering: the 2025 and 2026 scorers and their metrics, scoring stored
answers, run statistics, the leaderboard, and submission files."""
