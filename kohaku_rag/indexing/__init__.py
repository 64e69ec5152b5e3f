"""Indexing: the corpus, the per-document steps (tree, captions, vectors, index rows),
the index settings a lake records, and the assembly of the two indexes."""
