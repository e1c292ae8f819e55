"""What the generation engine takes and gives: its config, the per-request stats, the iteration log's
records, the errors of ``submit``, and the KV block arithmetic (rightsize.llm.engine runs them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from rightsize.errors import SpecError
from rightsize.llm.decoder import GENERATE_MODELS, SIZES

__all__ = ["BLOCK_TOKENS", "Cancelled", "EngineConfig", "EngineStopped", "GenStats", "IterationRecord",
           "PromptTooLong", "QueueFull", "blocks_for"]  # fmt: skip

BLOCK_TOKENS = 16  # tokens per KV block (vLLM's default block size)


class QueueFull(Exception):
    """``max_queue`` requests are already waiting (HTTP 503)."""


class EngineStopped(RuntimeError):
    """The engine stopped before the request finished (or was never started for it)."""


class Cancelled(Exception):
    """The request was cancelled (``Engine.cancel``)."""


class PromptTooLong(ValueError):
    """The prompt is longer than ``max_prompt_tokens`` (HTTP 413)."""


def blocks_for(tokens: int) -> int:
    """KV blocks that hold ``tokens`` tokens: ceil(tokens / BLOCK_TOKENS)."""
    return -(-tokens // BLOCK_TOKENS)


@dataclass(frozen=True)
class EngineConfig:
    model: str = "gpt2"  # zoo decoder name: gpt2 | llama-1b
    size: str = "small"  # tiny | small | full
    max_seqs: int = 16  # most sequences running at once (decode batch cap)
    kv_tokens: int = 8192  # KV cache capacity in tokens over all sequences, in blocks of BLOCK_TOKENS
    max_queue: int = 64  # waiting requests beyond which submit() raises QueueFull (-> HTTP 503)
    max_prompt_tokens: int = 512
    max_new_tokens: int = 512
    threads: int = 1  # torch intra-op threads of the engine
    seed: int = 0

    def __post_init__(self) -> None:
        if self.model not in GENERATE_MODELS:
            models = " or ".join(GENERATE_MODELS)
            raise SpecError("model", f"the generation engine serves {models} only (random-weight stand-ins that "
                            f"fit this machine), not {self.model!r}; use one of those (`rightsize plan` plans "
                            "other decoders by projection; without --generate a model serves predictions)")  # fmt: skip
        if self.size not in SIZES:
            raise SpecError("size", f"{self.size!r} is not a size; use one of {', '.join(SIZES)}")
        for name in ("max_seqs", "kv_tokens", "max_queue", "max_prompt_tokens", "max_new_tokens", "threads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise SpecError(name, f"must be an integer >= 1, got {getattr(self, name)!r}")
        longest = self.max_prompt_tokens + self.max_new_tokens
        if self.kv_tokens // BLOCK_TOKENS * BLOCK_TOKENS < longest:
            raise SpecError("kv_tokens", f"{self.kv_tokens} cannot hold one longest request (max_prompt_tokens + "
                            f"max_new_tokens = {longest} tokens); raise kv_tokens or lower those")  # fmt: skip


@dataclass(frozen=True)
class GenStats:
    queue_ms: float  # submit -> first admission
    ttft_ms: float  # submit -> first token
    tpot_ms: float  # first -> last token, per token after the first (0 for one token)
    tokens: int
    preemptions: int  # times this request was preempted


@dataclass(frozen=True)
class IterationRecord:
    index: int
    t_start_s: float  # time.perf_counter() at the iteration's start
    kind: Literal["prefill", "decode"]
    seqs: int
    tokens: int  # prefill: prompt tokens summed; decode: seqs
    context_tokens: int  # decode: keys attended, Σ(cache length + 1); prefill: 0
    ms: float

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {"i": d.pop("index"), "t_s": d.pop("t_start_s"), **d}
