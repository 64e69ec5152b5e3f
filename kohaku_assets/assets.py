"""The asset lists jobs, the runner and the definitions select from."""

from kohaku_assets.figures import captions
from kohaku_assets.indexing import bm25_index, document_tree, index_rows, leaf_embeddings, node_embeddings, source_document, vector_index

PER_DOCUMENT = [source_document, document_tree, captions, leaf_embeddings, node_embeddings, index_rows]
INDEXES = [vector_index, bm25_index]
