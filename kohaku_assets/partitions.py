"""Partitions shared by every asset module."""

from dagster import DynamicPartitionsDefinition

# One partition per document id; the corpus sensor and `kohaku index` add and delete them.
documents = DynamicPartitionsDefinition(name="documents")

INDEXING_GROUP = "indexing"
