"""Where the lake and the corpus are, and the loaded models, as one Dagster resource.

Defaults come from the environment (KOHAKU_LAKE, KOHAKU_CORPUS, KOHAKU_INDEX_CONFIG) so the
CLI, the sensor and `dagster dev` all see the same lake.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from dagster import ConfigurableResource

from kohaku_rag.captions import CAPTION_PROMPT, Captioner, OcrCaptioner, VisionLLMCaptioner
from kohaku_rag.config import IndexConfig, load_config_file
from kohaku_rag.embed import EmbedderSpec, make_embedder
from kohaku_rag.embed.base import Embedder
from kohaku_rag.lake import Lake

REPO_ROOT = Path(__file__).resolve().parent.parent


def default_lake() -> str:
    return os.environ.get("KOHAKU_LAKE", str(REPO_ROOT / "data_lake"))


def default_corpus() -> str:
    return os.environ.get("KOHAKU_CORPUS", str(Path(default_lake()) / "sample_corpus"))


@lru_cache(maxsize=4)
def _embedder(spec: EmbedderSpec, cache_dir: str) -> Embedder:
    # One model per process: in-process runs of many partitions share it.
    return make_embedder(spec, Path(cache_dir))


@lru_cache(maxsize=1)
def _ocr_captioner() -> Captioner:
    # The OCR engine loads its ONNX models once per process.
    return OcrCaptioner()


class KohakuSettings(ConfigurableResource):
    lake_root: str = ""
    corpus_dir: str = ""
    index_config_file: str = ""

    @property
    def lake(self) -> Lake:
        return Lake(Path(self.lake_root or default_lake()))

    @property
    def corpus(self) -> Path:
        return Path(self.corpus_dir or default_corpus())

    def index_config(self) -> IndexConfig:
        path = self.index_config_file or os.environ.get("KOHAKU_INDEX_CONFIG", "")
        return load_config_file(Path(path), IndexConfig) if path else IndexConfig()

    def captioner(self) -> Captioner | None:
        cfg = self.index_config()
        if cfg.captioner == "none":
            return None
        if cfg.captioner == "ocr":
            return _ocr_captioner()
        if not (cfg.vision_base_url and cfg.vision_model):
            raise ValueError("captioner = 'vision' needs vision_base_url and vision_model in the index config")
        return VisionLLMCaptioner(cfg.vision_base_url, cfg.vision_model, api_key_env=cfg.vision_api_key_env,
                                  prompt=cfg.vision_prompt or CAPTION_PROMPT, max_concurrent=cfg.vision_max_concurrent,
                                  timeout=cfg.vision_timeout, max_retries=cfg.vision_max_retries)

    def embedder(self) -> Embedder:
        return _embedder(self.index_config().embedder, str(self.lake.cache_dir / "embeddings"))
