"""Partitions and asset groups shared by every asset module."""

from dagster import DynamicPartitionsDefinition

# One partition per document id; the corpus sensor and `kohaku index` add and delete them.
documents = DynamicPartitionsDefinition(name="documents")
# One partition per config file in the configs folder, and per ensemble spec file.
configs = DynamicPartitionsDefinition(name="configs")
ensemble_specs = DynamicPartitionsDefinition(name="ensemble_specs")

INDEXING_GROUP = "indexing"
ANSWERING_GROUP = "answering"
