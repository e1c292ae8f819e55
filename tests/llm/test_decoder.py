"""Our batched static-cache forward against HF's own forward (with its KV cache), GPT-2 and Llama (GQA)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch

from rightsize.errors import SpecError
from rightsize.llm.decoder import Decoder, build_lm, lm_config, max_positions


def _hf_step(lm: Any, ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
    """HF forward of ``ids`` [1, T] after ``cache``: (last logits [vocab], new cache)."""
    key = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
    kwargs = {key: cache} if cache is not None else {}
    out = lm(input_ids=ids, use_cache=True, **kwargs)
    new_cache = out.get("cache", None) or out.get("past_key_values", None)
    return out.logits[0, -1], new_cache


@pytest.mark.parametrize("model", ["gpt2", "llama-1b"])
def test_prefill_and_batched_decode_match_hf(model: str) -> None:
    lm = build_lm(model, "tiny", seed=0)
    if model == "llama-1b":
        assert lm.config.num_key_value_heads < lm.config.num_attention_heads  # GQA is exercised
    dec = Decoder(lm, slots=5, max_len=64)
    g = torch.Generator().manual_seed(1)
    ref: dict[int, tuple[torch.Tensor, Any]] = {}  # HF's last logits and cache, per slot
    last: dict[int, int] = {}
    with torch.inference_mode():
        for slot, n in {0: 1, 1: 5, 2: 13, 3: 7}.items():  # different cache lengths in one batch
            ids = torch.randint(0, dec.vocab_size, (n,), generator=g)
            ref[slot] = _hf_step(lm, ids[None], None)
            got = dec.prefill(slot, ids.tolist())
            assert got.shape == (dec.vocab_size,)
            torch.testing.assert_close(got, ref[slot][0], atol=1e-4, rtol=0)
            last[slot] = int(got.argmax())
        # A run of slots in any order (keys read through a view), scattered slots (gathered keys), and a
        # slot whose cache moved (``move``, as the engine does when a sequence leaves).
        for step, slots in enumerate([[2, 1, 0], [3, 1], [0, 1, 2, 3], [3, 0], [4, 1, 2], [4, 0, 2, 1]]):
            if step == 4:
                dec.move(3, 4)
                ref[4], last[4] = ref.pop(3), last.pop(3)
            got = dec.decode(slots, [last[s] for s in slots])
            assert got.shape == (len(slots), dec.vocab_size)
            for row, slot in enumerate(slots):
                ref[slot] = _hf_step(lm, torch.tensor([[last[slot]]]), ref[slot][1])
                torch.testing.assert_close(got[row], ref[slot][0], atol=1e-4, rtol=0)
                last[slot] = int(got[row].argmax())
    assert dec.lengths == [1 + 4, 5 + 5, 13 + 4, 0, 7 + 5]


def test_release_and_reuse_a_slot_gives_the_same_logits() -> None:
    dec = Decoder(build_lm("gpt2", "tiny"), slots=2, max_len=32)
    first = dec.prefill(0, [1, 2, 3])
    dec.decode([0], [4])
    dec.release(0)
    assert dec.lengths[0] == 0
    torch.testing.assert_close(dec.prefill(0, [1, 2, 3]), first)


def test_bad_inputs_are_refused() -> None:
    dec = Decoder(build_lm("llama-1b", "tiny"), slots=2, max_len=8)
    with pytest.raises(ValueError, match="vocabulary"):
        dec.prefill(0, [dec.vocab_size])
    with pytest.raises(ValueError, match="1 to 8"):
        dec.prefill(0, list(range(9)))
    with pytest.raises(ValueError, match="prefilled"):
        dec.decode([1], [0])  # slot 1 is empty


def test_sizes_and_names() -> None:
    small = lm_config("gpt2", "small")
    assert (small.n_layer, small.n_embd, small.vocab_size) == (4, 384, 8192)
    assert max_positions(lm_config("gpt2", "tiny")) >= 4096  # a tiny model still fits prompt + generation
    assert lm_config("llama-1b", "small").num_key_value_heads < lm_config("llama-1b", "small").num_attention_heads
    with pytest.raises(SpecError, match="gpt2"):
        lm_config("resnet50", "tiny")
    with pytest.raises(SpecError, match="tiny, small, full"):
        lm_config("gpt2", "huge")
