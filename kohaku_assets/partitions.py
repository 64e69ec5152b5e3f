"""Partitions and asset groups shared by every asset module."""

from dagster import DynamicPartitionsDefinition

# One partition per document id; the corpus sensor and `kohaku index` add and delete them.
DOCUMENTS = "documents"
documents = DynamicPartitionsDefinition(name=DOCUMENTS)
# One partition per config file in the configs folder, and per ensemble spec file.
CONFIGS = "configs"
ENSEMBLE_SPECS = "ensemble_specs"
configs = DynamicPartitionsDefinition(name=CONFIGS)
ensemble_specs = DynamicPartitionsDefinition(name=ENSEMBLE_SPECS)

INDEXING_GROUP = "indexing"
ANSWERING_GROUP = "answering"
