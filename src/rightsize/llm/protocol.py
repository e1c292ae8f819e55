"""The wire format of POST /v1/generate: the request body's fields and checks, and the server-sent events.

    {"prompt": [ids] | "prompt_len": n, "max_new_tokens": m, "stream": true, "seed": s}
    -> data: {"t": id}  (one per token) ... data: {"done": true, "tokens", "queue_ms", "ttft_ms", "tpot_ms", ...}

A rejected body raises ``Reject(status, detail)``: 400 not JSON, 413 prompt too long, 422 a field named
with the fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rightsize.errors import did_you_mean
from rightsize.llm.engine import GenStats
from rightsize.wire import dumps, loads_strict

__all__ = ["FIELDS", "Reject", "event", "final_event", "parse_request"]

FIELDS = ("prompt", "prompt_len", "max_new_tokens", "stream", "seed")


class Reject(Exception):
    """A request the server answers with ``status`` and ``detail`` instead of generating."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def parse_request(body: bytes, info: dict[str, Any], seed: int) -> tuple[list[int], int, bool]:
    """(prompt ids, max_new_tokens, stream) from a JSON body; Reject(400 | 413 | 422) naming the fix."""
    try:
        req = loads_strict(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise Reject(400, f"body is not valid JSON: {str(exc)[:120]}") from None
    example = 'send e.g. {"prompt_len": 32, "max_new_tokens": 16}'
    if not isinstance(req, dict):
        raise Reject(422, f"body: must be a JSON object; {example}")
    for key in req:
        if key not in FIELDS:
            hint = did_you_mean(key, FIELDS) if len(key) <= 64 else ""
            raise Reject(422, f"{_shown(key, str)}: unknown field.{hint} Fields: {', '.join(FIELDS)}")
    if ("prompt" in req) == ("prompt_len" in req):
        raise Reject(422, f"prompt: give exactly one of 'prompt' (token ids) and 'prompt_len'; {example}")
    vocab, longest = info["vocab_size"], info["max_prompt_tokens"]
    if "prompt" in req:
        prompt = req["prompt"]
        if not isinstance(prompt, list) or not all(type(t) is int for t in prompt):
            raise Reject(422, f"prompt: must be a list of integer token ids in [0, {vocab})")
        if "seed" in req:
            raise Reject(422, "seed: draws a prompt_len request's prompt; a request with 'prompt' ids has none to "
                         "draw: drop it")  # fmt: skip
    else:
        n = req["prompt_len"]
        if type(n) is not int or n < 1:
            raise Reject(422, f"prompt_len: must be an integer >= 1, got {_shown(n)}")
        if n > longest:
            raise Reject(413, f"prompt_len: {n} is over max_prompt_tokens={longest}; ask for fewer tokens")
        s = req.get("seed", seed)
        if type(s) is not int or s < 0:
            raise Reject(422, f"seed: must be an integer >= 0, got {_shown(s)}")
        prompt = np.random.default_rng(s).integers(0, vocab, n).tolist()
    new = req.get("max_new_tokens", min(128, info["max_new_tokens"]))
    stream = req.get("stream", True)
    if not isinstance(stream, bool):
        raise Reject(422, f"stream: must be true or false, got {_shown(stream)}")
    return prompt, new, stream


def _shown(value: Any, form: Any = repr) -> str:
    """``value`` as a refusal quotes it, cut to 60 characters: a 1 MB value is not echoed back whole."""
    text = form(value)
    return text if len(text) <= 60 else text[:57] + "..."


def event(obj: dict[str, Any]) -> bytes:
    return b"data: " + dumps(obj) + b"\n\n"


def final_event(stats: GenStats) -> dict[str, Any]:
    return {"done": True, "tokens": stats.tokens, "queue_ms": round(stats.queue_ms, 3),
            "ttft_ms": round(stats.ttft_ms, 3), "tpot_ms": round(stats.tpot_ms, 4),
            "preemptions": stats.preemptions}  # fmt: skip
