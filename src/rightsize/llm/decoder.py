"""Batched decoding with a static KV cache, reading the weights of an HF GPT-2 or Llama module.

    dec = Decoder(build_lm("gpt2", "small"), slots=16, max_len=1024)
    logits = dec.prefill(slot=3, token_ids=[5, 17, 42])      # [vocab]; slot 3 now holds 3 tokens
    logits = dec.decode([3, 7], last_tokens=[11, 99])        # [2, vocab]; each slot grows by one
    dec.release(3)                                           # slot 3 empty again

The forward is our own (HF's forward is only the reference in tests): per layer a preallocated cache
``k, v: [slots, kv_heads, max_len, head_dim]`` and a length per slot. Shapes (T prompt tokens, B slots,
C hidden, H heads, KV kv heads, D head_dim, L longest cache among the B slots + 1):

1. Embed: GPT-2 ``wte[ids] + wpe[pos]`` (learned positions); Llama ``embed_tokens[ids]``.
2. Each layer: ``x += o_proj(attn(norm1(x)))``, then ``x += mlp(norm2(x))`` (pre-norm).
   GPT-2: LayerNorm, fused c_attn (Conv1D, weight [C, 3C]), GELU-tanh MLP (Radford et al. 2019).
   Llama: RMSNorm, q/k/v fused here into one [H·D + 2·KV·D, C] weight, RoPE on q and k
   (Su et al. 2021, rotate-half form as in HF), SwiGLU MLP ``down(silu(gate(x)) * up(x))``
   (Shazeer 2020), GQA: KV < H heads, each shared by H/KV query heads (Ainslie et al. 2023).
3. prefill: q [1, H, T, D] against the T new keys, causal; the keys/values fill cache[slot, :, :T].
   decode: q [B, H, 1, D]; the new key/value goes to cache[slot, :, len]; keys cache[slots, :, :L],
   masked past each slot's own length.
4. Final norm, LM head on the last position only -> logits.

Sizes (``build_lm``): "tiny" the zoo's tiny config (GPT-2 with 4096 positions, as the tiny Llama, so a
prompt + generation fits), "small" 4 layers × 384 wide × 6 heads, vocab 8192 (GPT-2 on one thread of a 2-core VM: decode
≈ 3 ms at batch 1, 11 ms at 16 with 128-token caches; prefill of 128 tokens ≈ 22 ms), "full" the zoo's
full shape (GPT-2 124M, Llama 3.2 1B). Weights are random (seeded): cost does not depend on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rightsize.errors import SpecError

__all__ = ["GENERATE_MODELS", "SIZES", "Decoder", "build_lm", "lm_config", "max_positions"]

GENERATE_MODELS = ("gpt2", "llama-1b")  # zoo decoders the engine can run for real
SIZES = ("tiny", "small", "full")
_SMALL = {"layers": 4, "hidden": 384, "heads": 6, "vocab": 8192}  # cost: see the module docstring


def lm_config(model: str, size: str) -> Any:
    """The HF config of ``model`` at ``size`` (no weights built)."""
    from transformers import GPT2Config, LlamaConfig

    from rightsize.models.zoo import ZOO, llama_config

    if model not in GENERATE_MODELS:
        raise SpecError("model", f"{model!r} cannot generate here; use one of {', '.join(GENERATE_MODELS)}")
    if size not in SIZES:
        raise SpecError("size", f"{size!r} is not a size; use one of {', '.join(SIZES)}")
    s = _SMALL
    if model == "gpt2":
        if size == "full":
            return GPT2Config()
        if size == "tiny":  # the zoo's tiny GPT-2, with room for a prompt plus its generation
            with torch.device("meta"):  # no weights, no RNG draws
                config = ZOO["gpt2"].builder(True).config
            config.n_positions = 4096  # as the tiny Llama's
            return config
        return GPT2Config(vocab_size=s["vocab"], n_positions=1024, n_embd=s["hidden"], n_layer=s["layers"],
                          n_head=s["heads"], bos_token_id=0, eos_token_id=0)  # fmt: skip
    if size != "small":
        return llama_config(model, tiny=size == "tiny")
    return LlamaConfig(hidden_size=s["hidden"], intermediate_size=1024, num_hidden_layers=s["layers"],
                       num_attention_heads=s["heads"], num_key_value_heads=s["heads"] // 2, vocab_size=s["vocab"],
                       max_position_embeddings=4096, tie_word_embeddings=True)  # fmt: skip


def max_positions(config: Any) -> int:
    """Longest sequence (prompt + generated) the model's positions allow."""
    return int(config.n_positions if config.model_type == "gpt2" else config.max_position_embeddings)


def build_lm(model: str, size: str, seed: int = 0) -> nn.Module:
    """The HF causal LM with random weights (seeded, global RNG untouched), in eval mode."""
    from transformers import AutoModelForCausalLM

    config = lm_config(model, size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lm = AutoModelForCausalLM.from_config(config)
    return lm.eval()


@dataclass
class _Layer:
    norm1: tuple[torch.Tensor, torch.Tensor | None]  # (weight, bias); bias None: RMSNorm
    qkv: tuple[torch.Tensor, torch.Tensor | None]  # weight [H·D + 2·KV·D, C], bias
    out: tuple[torch.Tensor, torch.Tensor | None]  # [C, H·D]
    norm2: tuple[torch.Tensor, torch.Tensor | None]
    up: tuple[torch.Tensor, torch.Tensor | None]  # GPT-2 c_fc [4C, C]; Llama gate ++ up [2I, C]
    down: tuple[torch.Tensor, torch.Tensor | None]  # [C, I]


def _t(conv_weight: torch.Tensor) -> torch.Tensor:
    """HF Conv1D stores [in, out]; F.linear wants [out, in]."""
    return conv_weight.detach().t().contiguous()


def _d(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach()


class Decoder:
    """Our own batched forward over an HF GPT-2 or Llama module's weights, with a static KV cache."""

    def __init__(self, lm: nn.Module, slots: int, max_len: int) -> None:
        cfg: Any = lm.config
        self.arch: str = cfg.model_type
        if self.arch not in ("gpt2", "llama"):
            raise SpecError("model", f"model_type {self.arch!r} is not supported; use a GPT-2 or Llama model")
        if max_len > max_positions(cfg):
            raise SpecError("max_len", f"{max_len} is past the model's {max_positions(cfg)} positions")
        self.slots, self.max_len = slots, max_len
        self.vocab_size = int(cfg.vocab_size)
        p = next(lm.parameters())
        self.dtype, self.device = p.dtype, p.device
        if self.arch == "gpt2":
            self._load_gpt2(lm)
        else:
            self._load_llama(lm)
        self.q_dim, self.kv_dim = self.heads * self.head_dim, self.kv_heads * self.head_dim
        shape = (slots, self.kv_heads, max_len, self.head_dim)
        self.k_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
        self.lengths = [0] * slots  # tokens held per slot

    def _load_gpt2(self, lm: Any) -> None:
        cfg, tr = lm.config, lm.transformer
        if cfg.scale_attn_by_inverse_layer_idx or cfg.reorder_and_upcast_attn or not cfg.scale_attn_weights:
            raise SpecError("model", "GPT-2 attention variants (scale_attn_by_inverse_layer_idx, …) are not supported")
        self.heads = self.kv_heads = cfg.n_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.eps = cfg.layer_norm_epsilon
        self.wte, self.wpe = tr.wte.weight.detach(), tr.wpe.weight.detach()
        self.layers = [
            _Layer(
                norm1=(b.ln_1.weight.detach(), b.ln_1.bias.detach()),
                qkv=(_t(b.attn.c_attn.weight), b.attn.c_attn.bias.detach()),
                out=(_t(b.attn.c_proj.weight), b.attn.c_proj.bias.detach()),
                norm2=(b.ln_2.weight.detach(), b.ln_2.bias.detach()),
                up=(_t(b.mlp.c_fc.weight), b.mlp.c_fc.bias.detach()),
                down=(_t(b.mlp.c_proj.weight), b.mlp.c_proj.bias.detach()),
            )
            for b in tr.h
        ]
        self.norm_f = (tr.ln_f.weight.detach(), tr.ln_f.bias.detach())
        self.lm_head = lm.lm_head.weight.detach()

    def _load_llama(self, lm: Any) -> None:
        cfg, m = lm.config, lm.model
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.wte = m.embed_tokens.weight.detach()
        self.layers = []
        for b in m.layers:
            a, mlp = b.self_attn, b.mlp

            def cat(*mods: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
                w = torch.cat([x.weight.detach() for x in mods])
                biases = [x.bias for x in mods]
                return w, None if biases[0] is None else torch.cat([_b.detach() for _b in biases if _b is not None])

            self.layers.append(
                _Layer(
                    norm1=(b.input_layernorm.weight.detach(), None),
                    qkv=cat(a.q_proj, a.k_proj, a.v_proj),
                    out=(a.o_proj.weight.detach(), _d(a.o_proj.bias)),
                    norm2=(b.post_attention_layernorm.weight.detach(), None),
                    up=cat(mlp.gate_proj, mlp.up_proj),
                    down=(mlp.down_proj.weight.detach(), _d(mlp.down_proj.bias)),
                )
            )
        self.norm_f = (m.norm.weight.detach(), None)
        self.lm_head = lm.lm_head.weight.detach()
        # RoPE tables [max_len, D] from the module's own inv_freq (so rope scaling variants carry over).
        rot = m.rotary_emb
        pos = torch.arange(self.max_len, dtype=torch.float32, device=self.device)
        freqs = torch.outer(pos, rot.inv_freq.float())
        emb = torch.cat([freqs, freqs], dim=-1)
        scale = float(getattr(rot, "attention_scaling", 1.0))
        self.cos, self.sin = (emb.cos() * scale).to(self.dtype), (emb.sin() * scale).to(self.dtype)

    # --- building blocks ------------------------------------------------------------------------------

    def _norm(self, x: torch.Tensor, wb: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
        w, b = wb
        if self.arch == "gpt2":
            return F.layer_norm(x, (x.shape[-1],), w, b, self.eps)
        return F.rms_norm(x, (x.shape[-1],), w, self.eps)

    def _mlp(self, x: torch.Tensor, layer: _Layer) -> torch.Tensor:
        h = F.linear(x, *layer.up)
        if self.arch == "gpt2":
            h = F.gelu(h, approximate="tanh")  # GPT-2's gelu_new
        else:
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        return F.linear(h, *layer.down)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [..., D] rotated: x·cos + rotate_half(x)·sin, rotate_half(x) = [-x2, x1]."""
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def _split(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[N, H·D + 2·KV·D] -> q [N, H, D], k and v [N, KV, D]."""
        q, k, v = qkv.split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
        n = qkv.shape[0]
        return q.view(n, self.heads, self.head_dim), k.view(n, self.kv_heads, -1), v.view(n, self.kv_heads, -1)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self._norm(x, self.norm_f), self.lm_head)

    def _check(self, tokens: torch.Tensor) -> None:
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(f"token ids must be in [0, {self.vocab_size}) (the model's vocabulary)")

    # --- the two operations ---------------------------------------------------------------------------

    @torch.inference_mode()
    def prefill(self, slot: int, token_ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Run one sequence's T prompt tokens (causal), fill ``slot``'s cache; the next token's logits [vocab]."""
        ids = torch.as_tensor(token_ids, dtype=torch.long, device=self.device)
        t = ids.numel()
        if not 0 < t <= self.max_len:
            raise ValueError(f"prompt must have 1 to {self.max_len} tokens, got {t}")
        self._check(ids)
        pos = torch.arange(t, device=self.device)
        x = self.wte[ids] + self.wpe[pos] if self.arch == "gpt2" else self.wte[ids]  # [T, C]
        for i, layer in enumerate(self.layers):
            q, k, v = self._split(F.linear(self._norm(x, layer.norm1), *layer.qkv))  # [T, H|KV, D]
            if self.arch == "llama":
                cos, sin = self.cos[:t, None], self.sin[:t, None]  # [T, 1, D]
                q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [H|KV, T, D]
            self.k_cache[i][slot, :, :t] = k
            self.v_cache[i][slot, :, :t] = v
            a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, enable_gqa=True)
            x = x + F.linear(a[0].transpose(0, 1).reshape(t, self.q_dim), *layer.out)  # [T, C]
            x = x + self._mlp(self._norm(x, layer.norm2), layer)
        self.lengths[slot] = t
        return self._logits(x[-1])

    @torch.inference_mode()
    def decode(self, slots: Sequence[int], last_tokens: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """One new token for each of B slots, attending to each slot's own cache; logits [B, vocab].

        When the slots form a run (a..a+B-1, any order) the keys are read through a view of the cache;
        otherwise they are gathered, a copy of B × L keys per layer that costs more than the attention.
        """
        slots, b = list(slots), len(slots)
        lengths = [self.lengths[s] for s in slots]
        if len(set(slots)) != b or not all(0 < n < self.max_len for n in lengths):
            raise ValueError(f"decode needs distinct prefilled slots with room left, got lengths {lengths}")
        ids = torch.as_tensor(last_tokens, dtype=torch.long, device=self.device)
        self._check(ids)
        order = sorted(range(b), key=slots.__getitem__)
        first = slots[order[0]]
        run = all(slots[j] == first + r for r, j in enumerate(order))
        if run and order != list(range(b)):  # rows in slot order; logits put back at the end
            ids, slots, lengths = ids[order], [slots[j] for j in order], [lengths[j] for j in order]
        idx = torch.as_tensor(slots, dtype=torch.long, device=self.device)
        rows: slice | torch.Tensor = slice(first, first + b) if run else idx
        longest = max(lengths) + 1
        pos = torch.as_tensor(lengths, dtype=torch.long, device=self.device)  # the new token's position [B]
        # Key j of row b is attended iff j <= its position: [B, 1, 1, L] (True = attend).
        mask = (torch.arange(longest, device=self.device)[None] <= pos[:, None])[:, None, None]
        x = self.wte[ids] + self.wpe[pos] if self.arch == "gpt2" else self.wte[ids]  # [B, C]
        for i, layer in enumerate(self.layers):
            q, k, v = self._split(F.linear(self._norm(x, layer.norm1), *layer.qkv))  # [B, H|KV, D]
            if self.arch == "llama":
                cos, sin = self.cos[pos, None], self.sin[pos, None]  # [B, 1, D]
                q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
            kc, vc = self.k_cache[i], self.v_cache[i]
            kc[idx, :, pos] = k  # cache[slot_b, :, pos_b] <- [B, KV, D]
            vc[idx, :, pos] = v
            keys, values = kc[rows, :, :longest], vc[rows, :, :longest]  # [B, KV, L, D]
            a = F.scaled_dot_product_attention(q[:, :, None], keys, values, attn_mask=mask, enable_gqa=True)
            x = x + F.linear(a.reshape(b, self.q_dim), *layer.out)  # [B, C]
            x = x + self._mlp(self._norm(x, layer.norm2), layer)
        for s in slots:
            self.lengths[s] += 1
        logits = self._logits(x)
        if run and order != list(range(b)):
            back = torch.empty(b, dtype=torch.long, device=self.device)
            back[torch.as_tensor(order, device=self.device)] = torch.arange(b, device=self.device)
            logits = logits[back]
        return logits

    @torch.inference_mode()
    def move(self, src: int, dst: int) -> None:
        """Move ``src``'s cache to ``dst`` (``src`` empty after): keeps a batch's slots a run."""
        n = self.lengths[src]
        for kc, vc in zip(self.k_cache, self.v_cache, strict=True):
            kc[dst, :, :n] = kc[src, :, :n]
            vc[dst, :, :n] = vc[src, :, :n]
        self.lengths[dst], self.lengths[src] = n, 0

    def release(self, slot: int) -> None:
        """Forget ``slot``'s tokens (its cache rows are overwritten by the next prefill)."""
        self.lengths[slot] = 0
