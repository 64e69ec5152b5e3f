"""Retrieval: multi-query hybrid search over the hierarchical index, and its settings."""
