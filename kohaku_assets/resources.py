"""Dagster resources: where the lake and the corpus are, and the loaded models.

`KohakuSettings` is configuration only. Its defaults come from the environment
(KOHAKU_LAKE, KOHAKU_CORPUS, KOHAKU_INDEX_CONFIG) so the CLI, the sensors and `dagster dev`
see the same lake, and its index settings are the ones the lake records. `ModelPool`
(kohaku_rag.model_pool) holds the loaded embedder, captioner, LLM and retriever; one pool
serves every run of a process, so the embedded LLM loads once.
"""

import os
from pathlib import Path

from dagster import ConfigurableResource

from kohaku_rag.config_files import load_config_file
from kohaku_rag.indexing.index_config import IndexConfig, resolve_index_config
from kohaku_rag.lake.layout import Lake
from kohaku_rag.model_pool import ModelPool

REPO_ROOT = Path(__file__).resolve().parent.parent
# The models loaded by this process: the code location's `models` resource, so the sensors,
# the UI's in-process runs and the CLI's runs share them (the embedded LLM loads once).
PROCESS_MODELS = ModelPool()

__all__ = ["PROCESS_MODELS", "REPO_ROOT", "KohakuSettings", "ModelPool", "default_corpus", "default_lake", "lake_path"]


def default_lake() -> str:
    return os.environ.get("KOHAKU_LAKE", str(REPO_ROOT / "data_lake"))


def default_corpus() -> str:
    return os.environ.get("KOHAKU_CORPUS", str(Path(default_lake()) / "sample_corpus"))


def lake_path(*parts: str) -> str:
    """A path in the lake this code location serves (`KOHAKU_LAKE`, which `kohaku ui` sets),
    for the descriptions the UI shows."""
    return str(Path(default_lake()).resolve().joinpath(*parts))


class KohakuSettings(ConfigurableResource):
    lake_root: str = ""
    corpus_dir: str = ""
    index_config_file: str = ""
    # Index files that are symbolic links leading outside the corpus folder (off: skipped).
    follow_links: bool = False

    @property
    def lake(self) -> Lake:
        return Lake(Path(self.lake_root or default_lake()))

    @property
    def corpus(self) -> Path:
        return Path(self.corpus_dir or default_corpus())

    def requested_index_config(self) -> tuple[IndexConfig | None, str]:
        """The index settings asked for by file (setting or KOHAKU_INDEX_CONFIG), and where from."""
        path = self.index_config_file or os.environ.get("KOHAKU_INDEX_CONFIG", "")
        return (load_config_file(Path(path), IndexConfig), f"index config {path}") if path else (None, "")

    def index_config(self) -> IndexConfig:
        """The lake's own index settings; a different request is refused with a message."""
        requested, origin = self.requested_index_config()
        return resolve_index_config(self.lake, requested, origin)
