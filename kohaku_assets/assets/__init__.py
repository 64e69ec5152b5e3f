"""Every asset, by stage: per-document indexing, the indexes, answering per config,
cross-config ensembles, the leaderboard, sweep reports, the answers `kohaku serve` served."""

from kohaku_assets.assets.answering import PER_CONFIG
from kohaku_assets.assets.documents import PER_DOCUMENT, table_repairs
from kohaku_assets.assets.ensembles import cross_ensemble
from kohaku_assets.assets.experiments import sweep_report
from kohaku_assets.assets.indexes import INDEXES
from kohaku_assets.assets.leaderboard import leaderboard
from kohaku_assets.assets.serving import served_answers, served_feedback

QA_ASSETS = [*PER_CONFIG, leaderboard]
ALL_ASSETS = [
    *PER_DOCUMENT,
    table_repairs,
    *INDEXES,
    *PER_CONFIG,
    cross_ensemble,
    leaderboard,
    sweep_report,
    served_answers,
    served_feedback,
]

__all__ = [
    "ALL_ASSETS",
    "INDEXES",
    "PER_CONFIG",
    "PER_DOCUMENT",
    "QA_ASSETS",
    "cross_ensemble",
    "leaderboard",
    "served_answers",
    "served_feedback",
    "sweep_report",
    "table_repairs",
]
