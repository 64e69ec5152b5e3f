"""Partitions and asset groups shared by every asset module."""

import warnings

from dagster import AssetCheckSpec, DynamicPartitionsDefinition, PartitionsDefinition, PreviewWarning

# One partition per document id; the corpus sensor and `kohaku index` add and delete them.
DOCUMENTS = "documents"
documents = DynamicPartitionsDefinition(name=DOCUMENTS)
# One partition per config file in the configs folder, and per ensemble spec file.
CONFIGS = "configs"
ENSEMBLE_SPECS = "ensemble_specs"
configs = DynamicPartitionsDefinition(name=CONFIGS)
ensemble_specs = DynamicPartitionsDefinition(name=ENSEMBLE_SPECS)
# One partition per sweep file in the configs folder's sweeps/ (its members are configs).
SWEEPS = "sweeps"
sweeps = DynamicPartitionsDefinition(name=SWEEPS)
# One partition per UTC day on which `kohaku serve` answered something (served_answers_sensor
# adds them): a day without questions is no partition, not a "missing" one.
SERVED_DAYS = "served_days"
served_days = DynamicPartitionsDefinition(name=SERVED_DAYS)

INDEXING_GROUP = "indexing"
ANSWERING_GROUP = "answering"

# Who answers for the assets (shown in the UI), and the tags every asset carries.
OWNERS = ["team:kohaku-lake"]
INDEXING_TAGS = {"stage": "indexing"}
ANSWERING_TAGS = {"stage": "answering"}


def check_spec(name: str, asset: str, description: str, partitions_def: PartitionsDefinition | None) -> AssetCheckSpec:
    """A check bound to its asset's partitions, so the UI shows each partition's result
    (not only the latest run's). Dagster 1.13 marks partitioned checks as preview; the
    warning is expected here and silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        return AssetCheckSpec(name, asset=asset, description=description, partitions_def=partitions_def)
