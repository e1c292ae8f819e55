"""Architecture arithmetic of a decoder-only transformer: parameters, weight and KV-cache bytes, FLOPs.

    shape = DecoderShape.from_zoo("llama-7b")          # or DecoderShape.from_hf_config(LlamaConfig(...))
    shape.params()                                      # 6_738_415_616
    shape.kv_bytes_per_token("fp16")                    # 524_288 (512 KiB)
    shape.max_concurrent_tokens(80 * 2**30, "fp16")     # KV tokens that fit next to the weights

Pure functions of the shape: nothing here imports torch or transformers. Conventions (one per quantity):

    FLOPs   2 per multiply-accumulate; a matmul of [T, k] x [k, n] is 2·T·k·n
    prefill 2·N_mm·T + 2·h·V + 2·L·T²·d        N_mm the block matmul weights, d = heads·head_dim; the LM
                                               head runs on the last prompt token only (the next token's
                                               logits, as serving engines do); attention QKᵀ and AV are
                                               4·L·T²·d over all pairs, halved for the causal mask (what
                                               FlashAttention computes, Dao et al. 2022)
    decode  per step, B sequences, C = Σ context lengths:  2·(N_mm + h·V)·B + 4·L·d·C
    bytes   a decode step reads every weight once (the input embedding only gathers B rows) and each
            sequence's KV cache, and writes one token of KV per sequence; activations are ignored
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rightsize.errors import NotFoundError, SpecError, did_you_mean
from rightsize.hf_config import check_heads, hf_dim, splits_heads
from rightsize.inputfile import read_user_text, short

__all__ = [
    "INT4_GROUP_SIZE",
    "KV_BYTES",
    "WEIGHT_BYTES",
    "DecoderShape",
    "decoder_shape",
]

# Bytes per stored element. Quantised weights (int8, int4) are the blocks' matmul weights only; embeddings,
# LM head, norms and biases stay fp16 (GPTQ / AWQ / LLM.int8() keep them so). Same rule as
# estimate/memory.py: int8 adds one fp16 scale per output row (LLM.int8(), Dettmers et al. 2022); int4 adds
# an fp16 scale and an fp16 zero point per group of INT4_GROUP_SIZE weights (GPTQ/AWQ default groups).
WEIGHT_BYTES: dict[str, float] = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "int8": 1.0, "int4": 0.5}
INT4_GROUP_SIZE = 128
KV_BYTES: dict[str, float] = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0}
_QUANTISED = ("int8", "int4")
# HF model types whose MLP is a plain up/down projection (the others are gated: SwiGLU / GeGLU).
_PLAIN_MLP_TYPES = ("gpt2", "gpt_neox", "gptj", "opt", "falcon", "phi", "bloom", "starcoder2")

# GPT-2 small: the GPT2Config defaults (Radford et al. 2019, "124M"); tiny mirrors zoo._gpt2.
_GPT2 = {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
_GPT2_TINY = {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 1000, "n_positions": 128}
# Tiny Llama: mirrors zoo.llama_config(tiny=True) (tests/llm/test_shape.py checks both mirrors).
_LLAMA_TINY = {
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
}  # fmt: skip


def _check(table: Mapping[str, float], key: str, what: str) -> float:
    if key not in table:
        raise SpecError(what, f"unknown precision {key!r}; use one of {', '.join(table)}.{did_you_mean(key, table)}")
    return table[key]


@dataclass(frozen=True)
class DecoderShape:
    """A decoder-only transformer's shape. ``bias``: GPT-2 style (every linear and LayerNorm has a bias);
    ``learned_positions``: rows of a learned position table (GPT-2's wpe; 0 for RoPE models)."""

    layers: int  # L
    hidden: int  # h, residual width
    heads: int  # query heads
    kv_heads: int  # key/value heads (GQA: fewer than heads; MHA: equal)
    head_dim: int
    intermediate: int  # MLP width
    vocab: int  # V
    tied_embeddings: bool  # LM head shares the input embedding matrix
    gated_mlp: bool  # SwiGLU (gate, up, down) rather than (up, down)
    bias: bool = False
    learned_positions: int = 0
    max_context: int = 0  # RoPE models: the positions trained for (max_position_embeddings); 0: not known

    # --- construction ----------------------------------------------------------------------------

    @classmethod
    def from_hf_config(cls, config: Any, source: str = "config") -> DecoderShape:
        """From a transformers config (GPT2Config, LlamaConfig, or any object / mapping with the same
        attribute names: GPT-2's ``n_layer, n_embd, n_head`` or Llama's ``num_hidden_layers, ...``). Every
        dimension is checked (``hf_dim``, ``check_heads``); errors name ``source: key``."""

        def get(name: str) -> Any:
            return config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)

        def dim(name: str, default: int | None = None) -> int:
            value = get(name)
            if value is not None:
                return hf_dim(value, name, source)
            if default is None:
                raise SpecError(f"{source}: {name}", f"is missing or null; a decoder config needs it: add the "
                                f"model's real {name}")  # fmt: skip
            return default

        tied = get("tie_word_embeddings")
        if tied is not None and not isinstance(tied, bool):
            raise SpecError(f"{source}: tie_word_embeddings", f"must be true or false, got {short(tied)}")
        if get("n_layer") is not None:  # GPT-2 naming
            layers, hidden, heads = dim("n_layer"), dim("n_embd"), dim("n_head")
            check_heads(source, ("n_embd", "n_head", "n_head"), hidden, heads, heads)
            if hidden % heads:
                raise SpecError(f"{source}: n_head", f"is {heads}, which does not divide n_embd ({hidden}); GPT-2 "
                                "splits n_embd evenly across the heads: use a divisor of it")  # fmt: skip
            return cls(
                layers=layers, hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
                intermediate=dim("n_inner", 4 * hidden), vocab=dim("vocab_size"),
                tied_embeddings=True if tied is None else tied, gated_mlp=False, bias=True,
                learned_positions=dim("n_positions", 1024),  # GPT2Config's default: it planned 2048 past it
            )  # fmt: skip
        if get("num_hidden_layers") is not None:  # Llama naming (Mistral, Qwen2, ... share it)
            layers, hidden, heads = dim("num_hidden_layers"), dim("hidden_size"), dim("num_attention_heads")
            kv_heads = dim("num_key_value_heads", heads)
            check_heads(source, ("hidden_size", "num_attention_heads", "num_key_value_heads"), hidden, heads, kv_heads)
            if get("head_dim") is None and hidden % heads:  # the heads split hidden_size evenly unless head_dim says
                raise SpecError(f"{source}: num_attention_heads", f"is {heads}, which does not divide hidden_size "
                                f"({hidden}); use a divisor of it, or give the model's head_dim")  # fmt: skip
            model_type = get("model_type")
            return cls(
                layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=dim("head_dim", hidden // heads),
                intermediate=dim("intermediate_size"), vocab=dim("vocab_size"),
                tied_embeddings=False if tied is None else tied,
                gated_mlp=not (isinstance(model_type, str) and model_type in _PLAIN_MLP_TYPES),
                max_context=dim("max_position_embeddings", 0),
            )  # fmt: skip
        raise SpecError(
            source,
            "has no layer count: a decoder's config names it n_layer (GPT-2: with n_embd, n_head) or "
            "num_hidden_layers (Llama, Mistral, Qwen2: with hidden_size, num_attention_heads). To fix: give the "
            "model's whole config.json (from the Python API, a DecoderShape also does)",
        )

    @classmethod
    def from_zoo(cls, name: str, tiny: bool = False) -> DecoderShape:
        """The shape of a zoo decoder (``gpt2``, ``llama-1b``, ``llama-7b``, ``llama-13b``), without transformers."""
        from rightsize.models.zoo import _LLAMA_CONTEXT, _LLAMA_SHAPES

        if name == "gpt2":
            return cls.from_hf_config(_GPT2_TINY if tiny else _GPT2)
        if name in _LLAMA_SHAPES:
            shape = _LLAMA_TINY if tiny else _LLAMA_SHAPES[name]
            context = 4096 if tiny else _LLAMA_CONTEXT[name]
            return cls.from_hf_config({**shape, "tie_word_embeddings": name == "llama-1b",  # as zoo.llama_config
                                       "max_position_embeddings": context})  # fmt: skip
        choices = ["gpt2", *_LLAMA_SHAPES]
        raise NotFoundError(f"zoo model {name!r} is not a decoder with a known shape.{did_you_mean(name, choices)}")

    # --- parameters and bytes --------------------------------------------------------------------

    @property
    def attn_width(self) -> int:
        """d = heads·head_dim: width of Q and of the attention output (= hidden for most models)."""
        return self.heads * self.head_dim

    def _layer_matrices(self) -> list[tuple[int, int]]:
        """(in, out) of each matmul weight of one block: q, k, v, o, then the MLP."""
        kv = self.kv_heads * self.head_dim
        attn = [(self.hidden, self.attn_width), (self.hidden, kv), (self.hidden, kv), (self.attn_width, self.hidden)]
        up = [(self.hidden, self.intermediate)] * (2 if self.gated_mlp else 1)
        return attn + up + [(self.intermediate, self.hidden)]

    def block_matmul_params(self) -> int:
        """N_mm: matmul weights of all blocks (what int8/int4 quantise; 2·N_mm FLOPs per token)."""
        return self.layers * sum(i * o for i, o in self._layer_matrices())

    def _block_out_rows(self) -> int:
        return self.layers * sum(o for _, o in self._layer_matrices())

    def embedding_params(self) -> int:
        """Input token table V·h plus the learned position table (GPT-2)."""
        return (self.vocab + self.learned_positions) * self.hidden

    def params(self) -> int:
        """All parameters: embeddings, blocks (+ biases, norms), final norm, LM head unless tied."""
        norm = 2 * self.hidden if self.bias else self.hidden  # LayerNorm weight + bias | RMSNorm weight
        biases = self._block_out_rows() if self.bias else 0
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        blocks = self.block_matmul_params() + biases + self.layers * 2 * norm
        return self.embedding_params() + blocks + norm + head

    def weight_bytes(self, precision: str = "fp16") -> int:
        """Bytes of the weights as stored (see WEIGHT_BYTES for what int8 / int4 include)."""
        per = _check(WEIGHT_BYTES, precision, "precision")
        if precision not in _QUANTISED:
            return int(self.params() * per)
        q = self.block_matmul_params()
        rest = (self.params() - q) * WEIGHT_BYTES["fp16"]
        if precision == "int8":
            quant = q + 2 * self._block_out_rows()  # + one fp16 scale per output row
        else:
            quant = q // 2 + math.ceil(q / INT4_GROUP_SIZE) * 4  # + fp16 scale and zero per group of 128
        return int(quant + rest)

    def weight_bytes_read(self, precision: str = "fp16") -> int:
        """Weight bytes one forward pass streams: all but the input tables (a gather reads a few rows);
        a tied LM head still reads the shared matrix once."""
        per = WEIGHT_BYTES["fp16"] if precision in _QUANTISED else _check(WEIGHT_BYTES, precision, "precision")
        skipped = self.learned_positions * self.hidden + (0 if self.tied_embeddings else self.vocab * self.hidden)
        return int(self.weight_bytes(precision) - skipped * per)

    def kv_bytes_per_token(self, kv_precision: str = "fp16") -> int:
        """KV cache per token: 2 (K and V) × L × kv_heads × head_dim × bytes. GQA-aware: kv_heads, not heads
        (the paged KV cache of vLLM, Kwon et al. SOSP'23, https://arxiv.org/abs/2309.06180, stores exactly
        this per token slot). Llama-2-7B fp16: 2·32·32·128·2 B = 512 KiB."""
        per = _check(KV_BYTES, kv_precision, "kv_precision")
        return int(2 * self.layers * self.kv_heads * self.head_dim * per)

    def splits_over(self, tp: int) -> bool:
        """Whether tensor parallel over ``tp`` GPUs can split this model as vLLM does (``hf_config.splits_heads``)."""
        return splits_heads(self.heads, self.kv_heads, tp)

    def kv_shards(self, tp: int) -> int:
        """GPUs one token's KV is split over at tensor parallel ``tp``: min(tp, kv_heads). Past kv_heads each GPU
        holds a whole (replicated) KV head, so 2 KV heads over 8 GPUs store and read 1/2 of a token's KV each,
        not 1/8."""
        return max(1, min(tp, self.kv_heads))

    def max_concurrent_tokens(
        self,
        memory_bytes: float,
        precision: str = "fp16",
        kv_precision: str = "fp16",
        reserve_fraction: float = 0.1,
    ) -> int:
        """KV-cache tokens that fit in ``memory_bytes`` next to the weights, keeping ``reserve_fraction`` for
        the CUDA context, activations and workspace (vLLM's gpu_memory_utilization=0.9 keeps 0.1); 0 if the
        weights alone do not fit."""
        if not 0.0 <= reserve_fraction < 1.0:
            raise SpecError("reserve_fraction", f"must be in [0, 1), got {reserve_fraction}")
        free = memory_bytes * (1.0 - reserve_fraction) - self.weight_bytes(precision)
        return max(0, int(free // self.kv_bytes_per_token(kv_precision)))

    def prefill_activation_bytes(self, tokens: int, tp: int = 1, seqs: int = 1) -> int:
        """Peak transient activations of one 16-bit forward pass over ``tokens`` tokens of ``seqs`` sequences: the
        pass an engine profiles before it gives the rest of the GPU to KV blocks (vLLM runs one over
        max_num_batched_tokens). Per token the MLP's live set, the residual and its normed copy (2 h) and gate, up
        and their product (3 x intermediate / tp), attention fused (no tokens² scores); plus fp32 logits of each
        sequence's last token. Llama-2-7B over 4096 tokens: 0.31 GiB."""
        per_token = 2 * self.hidden + 3 * self.intermediate / max(1, tp)
        return int(tokens * per_token * 2 + seqs * self.vocab * 4)

    # --- FLOPs and bytes per iteration -----------------------------------------------------------

    def prefill_flops(self, prompt_tokens: int) -> float:
        """FLOPs of prefilling one sequence of T tokens (module docstring: causal attention counted half)."""
        t = float(prompt_tokens)
        linear = 2.0 * self.block_matmul_params() * t + 2.0 * self.hidden * self.vocab  # LM head: last token
        attention = 4.0 * self.layers * t * t * self.attn_width / 2.0  # QKᵀ + AV over T² pairs, causal half
        return linear + attention

    def prefill_bytes(self, prompt_tokens: int, precision: str = "fp16", kv_precision: str = "fp16") -> float:
        """Bytes of prefilling one sequence: the weights once plus writing T tokens of KV."""
        return float(self.weight_bytes_read(precision) + self.kv_bytes_per_token(kv_precision) * prompt_tokens)

    def decode_flops(self, batch: int, context_tokens: int) -> float:
        """FLOPs of one decode step of ``batch`` sequences whose context lengths sum to ``context_tokens``."""
        linear = 2.0 * (self.block_matmul_params() + self.hidden * self.vocab) * batch
        attention = 4.0 * self.layers * self.attn_width * float(context_tokens)  # q·K and p·V over C keys
        return linear + attention

    def decode_bytes(
        self, batch: int, context_tokens: int, precision: str = "fp16", kv_precision: str = "fp16"
    ) -> float:
        """Bytes of one decode step: weights read once, every sequence's KV read, one new token of KV written
        per sequence (``context_tokens`` = Σ context lengths over the batch)."""
        kv = self.kv_bytes_per_token(kv_precision)
        return float(self.weight_bytes_read(precision) + kv * (context_tokens + batch))


# transformers model_type values of encoder-only models (text and vision): an hf: config of one is no decoder
_ENCODER_TYPES = frozenset({"bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2",
                            "xlm-roberta", "camembert", "mpnet", "modernbert", "vit", "convnext",
                            "resnet"})  # fmt: skip


def decoder_shape(model: str, tiny: bool = False, base_dir: Path | None = None) -> DecoderShape:
    """A zoo decoder by name (``gpt2``, ``llama-7b``, ...), or ``hf:DIR`` holding a decoder's config.json (no
    weights, no transformers; a relative DIR not in the working directory is read from ``base_dir``): the one
    resolver of a decoder reference, for serving plans (``targets.generative``) and fine-tune plans alike."""
    if model.startswith("hf:"):
        config = _read_hf_config(model[3:], base_dir)
        if not isinstance(config, dict):  # `[1, 2]` had read "has no layer count"
            raise SpecError("model", f"{short(model)}'s config.json holds a JSON {type(config).__name__}, not an "
                            "object of fields. To fix: point hf: at a decoder's transformers config.json")  # fmt: skip
        kind = config.get("model_type")
        if isinstance(kind, str) and kind in _ENCODER_TYPES and not config.get("is_decoder"):
            raise SpecError("model", f"{short(model)} holds a {short(kind)} config: an encoder, not a decoder; token "
                            "generation and decoder fine-tunes need one. To fix: point hf: at a decoder's config.json "
                            "(Llama, Mistral, Qwen2, GPT-2, ...); plan an encoder with rightsize plan")  # fmt: skip
        return DecoderShape.from_hf_config(config, source="config.json")
    from rightsize.models.zoo import ZOO

    entry = ZOO.get(model)
    decoders = [name for name, e in ZOO.items() if e.family == "decoder"]
    if entry is None:
        raise NotFoundError(f"model {model!r} is not a zoo decoder.{did_you_mean(model, decoders)} Use one of "
                            f"{', '.join(decoders)}, or hf:DIR with a decoder's config.json")  # fmt: skip
    if entry.family != "decoder":
        article = "an" if entry.family[:1] in "aeiou" else "a"
        raise SpecError("model", f"{model} is {article} {entry.family}, not a decoder: token generation and decoder "
                        f"fine-tunes need one. To fix: use {', '.join(decoders)} or hf:DIR with a decoder's "
                        f"config.json; to fine-tune {model}, `rightsize plan` a spec with mode: training (it measures "
                        "the model here)")  # fmt: skip
    return DecoderShape.from_zoo(model, tiny=tiny)


def _read_hf_config(ref: str, base_dir: Path | None) -> Any:
    """The parsed config.json of ``hf:ref`` (DIR/config.json or the file itself), read through the user-file
    boundary (regular file, size cap, UTF-8): a FIFO, a huge file or JSON nested too deep is a SpecError."""
    path = Path(ref)
    path = path if path.is_absolute() or base_dir is None or path.exists() else base_dir / path  # spec.load's rule
    cfg = path / "config.json" if path.is_dir() else path
    fix = "To fix: point hf: at a directory holding a decoder's transformers config.json"
    try:
        text = read_user_text(cfg, "config.json")
    except NotFoundError:
        raise SpecError("model", f"no decoder config at {short(str(cfg))}. {fix}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            "model", f"{short(str(cfg))} is not valid JSON ({exc.msg} at line {exc.lineno}). {fix}"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits; nesting past the recursion limit
        what = "nests too deeply" if isinstance(exc, RecursionError) else "holds a number too long"
        raise SpecError("model", f"{short(str(cfg))} {what} to read as a config. {fix}") from None
