"""The jobs the sensors, the schedule and the UI launch."""

from dagster import define_asset_job

from kohaku_assets.assets import INDEXES, PER_CONFIG, PER_DOCUMENT, cross_ensemble
from kohaku_assets.partitions import configs, documents, ensemble_specs

index_document_job = define_asset_job(
    "index_document",
    selection=PER_DOCUMENT,
    partitions_def=documents,
    description="Parse, embed and prepare the index rows of one document.",
)
assemble_indexes_job = define_asset_job(
    "assemble_indexes", selection=INDEXES, description="Upsert changed documents into sqlite-vec and rebuild BM25."
)
answer_config_job = define_asset_job(
    "answer_config",
    selection=PER_CONFIG,
    partitions_def=configs,
    description="Questions → retrievals → predictions → ensembles → scores and submission CSV of one config.",
)
cross_ensemble_job = define_asset_job(
    "vote_ensemble",
    selection=[cross_ensemble],
    partitions_def=ensemble_specs,
    description="Vote the stored runs of the configs an ensemble spec names.",
)

JOBS = [index_document_job, assemble_indexes_job, answer_config_job, cross_ensemble_job]
