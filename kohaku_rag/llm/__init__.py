"""Chat LLMs: the `ChatModel` protocol, its backends, the response cache, and a factory.

Generation settings (temperature, max_tokens, seed, schema) travel in each `ChatRequest`;
`LLMSpec` only says which model to talk to and how.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from kohaku_rag.config_files import RETRIES, SECONDS, Range
from kohaku_rag.http_retry import check_api_key_env, one_credential_message, safe_url, url_has_credentials
from kohaku_rag.llm.base import ChatModel, ChatRequest, ChatResult, ContextOverflowError, Message
from kohaku_rag.llm.cache import CachedChat
from kohaku_rag.llm.model_files import BUNDLED_MODEL, bundled_model

__all__ = [
    "ChatModel",
    "ChatRequest",
    "ChatResult",
    "CachedChat",
    "ContextOverflowError",
    "LLMSpec",
    "Message",
    "make_chat_model",
]

Backend = Literal["llama", "openai"]


@dataclass(frozen=True)
class LLMSpec:
    """Which model answers.

    llama: `model` is the bundled model's name (its file is kept once per machine:
    `model_files.machine_model_dir`), or a path to a .gguf file (relative paths are under
    `<lake>/models`); `n_ctx` is its context size, `n_threads` its CPU threads (None:
    every core). openai: `model` is the server's model name, `base_url` its API root,
    `api_key_env` the variable holding the key (None, or "" in a file, for a server without auth),
    `max_concurrent` the requests in flight, `context_window` the server model's window,
    `timeout` the seconds one request may take and `max_retries` how often a transient
    failure (429, 5xx, timeout, dropped connection) is retried before the call fails.
    `max_concurrent`, `timeout` and `max_retries` change throughput, never a reply.
    Credentials in `base_url` (`user:key@host`, `?api-key=...`) never show in its repr.
    """

    backend: Backend = "llama"
    model: str = BUNDLED_MODEL
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    max_concurrent: Annotated[int, Range(1, 1024)] = 4
    context_window: Annotated[int, Range(256, 16_777_216)] = 32768
    n_ctx: Annotated[int, Range(256, 1_048_576)] = 4096
    n_threads: Annotated[int, Range(1, 1024)] | None = None
    timeout: Annotated[float, SECONDS] = 120.0
    max_retries: Annotated[int, RETRIES] = 5

    def __post_init__(self) -> None:
        # TOML has no null: `api_key_env = ""` is how a config file says "no key" (a server
        # without auth, or one reached with the URL's own user:password@).
        if self.api_key_env == "":
            object.__setattr__(self, "api_key_env", None)
        check_api_key_env(self.api_key_env)
        if self.backend not in ("llama", "openai"):
            raise ValueError(f"LLM backend {self.backend!r} is not 'llama' or 'openai'")
        if self.backend == "openai" and not self.base_url:
            raise ValueError(f"LLM backend 'openai' (model {self.model!r}) needs a base_url")
        # Refused when the config is read, not at its first request: a named key and the
        # URL's credentials can never both be sent.
        if self.backend == "openai" and self.api_key_env is not None and url_has_credentials(self.base_url or ""):
            raise ValueError(one_credential_message(self.base_url or "", self.api_key_env))
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {self.max_concurrent}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.base_url:
            shown["base_url"] = safe_url(self.base_url)
        return "LLMSpec(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def make_chat_model(spec: LLMSpec, lake_root: Path) -> ChatModel:
    """The model `spec` names, wrapped in the response cache under `<lake>/cache/llm`."""
    lake_root = Path(lake_root)
    inner: ChatModel
    if spec.backend == "llama":
        from kohaku_rag.llm.model_process import ModelProcess

        gguf = _gguf_path(spec.model, lake_root / "models")
        # The fixed prompt openings' KV states live beside the model file, as it does once per
        # machine, so a new process starts warm (prefix_states.py). The model runs in a process
        # of its own, so a crash in llama.cpp is an error here, not our death (model_process.py).
        inner = ModelProcess(gguf, n_ctx=spec.n_ctx, n_threads=spec.n_threads, state_dir=gguf.parent / "prefix-states")
    else:
        from kohaku_rag.llm.openai_compat import OpenAIChat

        assert spec.base_url is not None  # checked by LLMSpec
        inner = OpenAIChat(
            spec.base_url,
            spec.model,
            api_key_env=spec.api_key_env,
            max_concurrent=spec.max_concurrent,
            timeout=spec.timeout,
            max_retries=spec.max_retries,
            context_window=spec.context_window,
        )
    return CachedChat(inner, lake_root / "cache" / "llm")


def _gguf_path(model: str, models_dir: Path) -> Path:
    if model == BUNDLED_MODEL:
        return bundled_model(models_dir)
    if not model.endswith(".gguf"):
        raise ValueError(f"llama model {model!r} is neither the bundled {BUNDLED_MODEL!r} nor a path to a .gguf file")
    path = Path(model).expanduser()
    return path if path.is_absolute() else models_dir / path
