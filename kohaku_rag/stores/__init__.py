"""The search structures on disk: the sqlite-vec node store and the BM25 index."""
