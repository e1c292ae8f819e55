"""Items of a batch-inference pipeline: synthetic sources, a user's file, and the CPU preprocessing step.

Batches are ``dict[str, np.ndarray]`` (the Ray Data "numpy" format), always with an ``id`` column:

    read        tokens:   {"id": int64 [n], "text": object [n]}        synthetic sentences
                image:    {"id": int64 [n], "image": uint8 [n, H, W, 3]}
                features: {"id": int64 [n], "features": float32 [n, F]}
    preprocess  tokens -> "x": int64 [n, S] (hashing tokenizer)  image -> "x": float32 [n, 3, H, W]
                features -> "x": float32 [n, F] (standardised per row)

Synthetic items are a pure function of their id, so any worker can make any item and a rerun
makes the same ones. numpy only (a core dependency): torch and ray are not imported here.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rightsize.errors import NotFoundError, SpecError, UnsupportedError
from rightsize.inputfile import short

Batch = dict[str, np.ndarray]

# A fixed synthetic lexicon: 512 pronounceable words from consonant-vowel syllables.
_C, _V = "bdfgklmnprstvz", "aeiou"
LEXICON = np.array(
    [_C[i % 14] + _V[(i // 14) % 5] + _C[(i * 7) % 14] + _V[(i * 3) % 5] + ("n" if i % 3 else "") for i in range(512)],
    dtype=object,
)
PAD_ID, CLS_ID = 0, 1  # token ids 0 and 1 are reserved; words hash into [2, vocab)


@dataclass(frozen=True)
class ItemSpec:
    """What one item looks like for a model (from the zoo entry and the spec's input)."""

    kind: str  # tokens | image | features
    seq_len: int = 128  # tokens per sample
    vocab: int = 30522  # token ids are drawn below this
    image_size: int = 224  # pixels per side
    features: int = 1000  # feature-vector width

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mix(ids: np.ndarray, width: int, salt: int) -> np.ndarray:
    """Deterministic pseudo-random uint64 [n, width] from item ids (a splitmix-style hash)."""
    x = ids.astype(np.uint64)[:, None] * np.uint64(0x9E3779B97F4A7C15) + np.arange(width, dtype=np.uint64)[None, :]
    x ^= np.uint64(salt)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return x


def synthetic_read(spec: ItemSpec, ids: np.ndarray) -> Batch:
    """The raw items with these ids (texts, uint8 images or float features)."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    if spec.kind == "tokens":
        words = max(spec.seq_len - 1, 1)  # one slot goes to [CLS]
        idx = (_mix(ids, words, 1) % np.uint64(len(LEXICON))).astype(np.int64)
        text = np.array([" ".join(LEXICON[row]) for row in idx], dtype=object)
        return {"id": ids, "text": text}
    if spec.kind == "image":
        shape = (spec.image_size, spec.image_size, 3)
        images = np.empty((n, *shape), dtype=np.uint8)
        for i, item in enumerate(ids):  # one generator per item: the same pixels wherever it is made
            images[i] = np.random.default_rng(int(item)).integers(0, 256, size=shape, dtype=np.uint8)
        return {"id": ids, "image": images}
    raw = (_mix(ids, spec.features, 3) >> np.uint64(40)).astype(np.float64) / float(1 << 24)  # uniform [0, 1)
    return {"id": ids, "features": (raw * 4.0 - 2.0).astype(np.float32)}


def tokenize(texts: np.ndarray, seq_len: int, vocab: int) -> np.ndarray:
    """Whitespace words -> crc32 hash ids in [2, vocab), [CLS] first, padded/truncated: int64 [n, seq_len]."""
    out = np.full((len(texts), seq_len), PAD_ID, dtype=np.int64)
    span = max(vocab - 2, 1)
    for i, text in enumerate(texts):
        toks = [CLS_ID] + [2 + zlib.crc32(w.encode()) % span for w in str(text).split()[: seq_len - 1]]
        out[i, : len(toks)] = toks
    return out


# ImageNet channel mean/std (torchvision's normalisation constants).
_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)[None, :, None, None]
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)[None, :, None, None]


def preprocess(spec: ItemSpec, batch: Batch) -> Batch:
    """Raw items -> model input ``x`` (other columns pass through, the raw payload is dropped)."""
    out = {k: v for k, v in batch.items() if k not in ("text", "image", "features")}
    if spec.kind == "tokens":
        out["x"] = tokenize(batch["text"], spec.seq_len, spec.vocab)
    elif spec.kind == "image":
        img = batch["image"]
        if img.ndim == 2:  # flat pixels from a file: [n, H*W*3]
            img = img.reshape(len(img), spec.image_size, spec.image_size, 3)
        x = img.astype(np.float32).transpose(0, 3, 1, 2) / 255.0  # [n, 3, H, W]
        out["x"] = (x - _MEAN) / _STD
    else:
        f = np.asarray(batch["features"], dtype=np.float32)
        mu, sd = f.mean(axis=1, keepdims=True), f.std(axis=1, keepdims=True) + 1e-6
        out["x"] = ((f - mu) / sd).astype(np.float32)
    return out


# -- a user's file ----------------------------------------------------------------------------------

PAYLOAD_COLUMN = {"tokens": "text", "features": "features", "image": "image"}


def read_table(path: str | Path, spec: ItemSpec) -> Any:
    """A Parquet or JSONL file as a pyarrow Table with ``id`` (row number when absent) and the payload column."""
    import pyarrow as pa

    p = Path(path)
    if not p.exists():
        raise NotFoundError(f"--input: {str(p)!r} does not exist")
    if p.is_dir():  # "must be a .parquet or .jsonl file, got 'tmp'" lost the path and that it is a folder
        raise SpecError("--input", f"{short(str(p))} is a folder; give a .parquet or .jsonl file")
    suffix = p.suffix.lower()
    if suffix not in (".parquet", ".jsonl", ".json", ".ndjson"):
        raise SpecError("--input", f"must be a .parquet or .jsonl file, got {p.name!r}")
    kind = "Parquet" if suffix == ".parquet" else "JSON lines"
    if suffix != ".parquet" and p.is_file() and p.stat().st_size == 0:  # pyarrow: "(Empty JSON file)"
        raise SpecError("--input", f"{short(str(p))} has no rows; give one row per item")
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(p)
        else:
            import pyarrow.json as pj

            # a block must hold the longest line: the default 1 MiB refused a valid file with a 10 MB line
            block = max(1 << 20, min(p.stat().st_size + 1, 1 << 28))
            table = pj.read_json(p, read_options=pj.ReadOptions(block_size=block))
    except (pa.ArrowException, OSError) as exc:  # empty, truncated, not that format, a value no column can hold
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if suffix != ".parquet":  # pyarrow counts JSON rows from 0: say the file's line, as an editor shows it
            why = re.sub(r"\bin row (\d+)", lambda m: f"on line {int(m.group(1)) + 1}", why)
        raise SpecError("--input", f"cannot read {short(str(p))} as {kind} ({why[:160]}); give a {kind} file "
                        f"of one row per item with a {PAYLOAD_COLUMN[spec.kind]!r} column") from None  # fmt: skip
    if not table.num_rows:  # it "ran" and planned nothing, exit 0
        raise SpecError("--input", f"{short(str(p))} has no rows; give one row per item")
    col = PAYLOAD_COLUMN[spec.kind]
    if col not in table.column_names:
        if spec.kind == "image":
            raise UnsupportedError("--input: image models need an 'image' column of H*W*3 uint8 pixels per row")
        raise SpecError(
            "--input", f"needs a {col!r} column for a {spec.kind} model; found {', '.join(table.column_names)}"
        )
    _check_payload(table.column(col), col, spec)
    if "id" not in table.column_names:
        table = table.append_column("id", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    table = table.set_column(table.column_names.index("id"), "id", _int64_ids(table.column("id")))
    ids = table.column("id").to_numpy()
    if len(np.unique(ids)) != len(ids):
        raise SpecError("--input", "the 'id' column has duplicates; ids must be unique to check every item ran once")
    return table.select(["id", col])


def _int64_ids(column: Any) -> Any:
    """The ``id`` column as int64, or a SpecError: text ids were a worker's traceback, float ids were truncated
    (every item then "missing"), nulls read as duplicates, ids past int64 wrapped."""
    import pyarrow as pa

    t = column.type
    if column.null_count:
        raise SpecError("--input", f"the 'id' column has {column.null_count} empty (null) rows; give every row an id")
    if pa.types.is_floating(t):  # JSON readers take 1.0 (and anything past int64) as a double
        import pyarrow.compute as pc

        whole = pc.all(pc.equal(column, pc.floor(column))).as_py()
        if not whole or pc.max(pc.abs(column)).as_py() >= 2.0**63:
            raise SpecError("--input", "the 'id' column must hold whole numbers within +-2^63 (got fractions or "
                            "larger); drop it to number the rows")  # fmt: skip
        return column.cast(pa.int64())
    if not pa.types.is_integer(t):
        raise SpecError("--input", f"the 'id' column must hold whole numbers, got {t}; drop it to number the rows")
    try:
        return column.cast(pa.int64())  # safe cast: a uint64 past int64's range is refused, not wrapped
    except pa.ArrowInvalid:
        raise SpecError("--input", "the 'id' column holds ids past 2^63 - 1; use smaller ids") from None


def _check_payload(column: Any, col: str, spec: ItemSpec) -> None:
    """Refuse a payload column the workers could not turn into a batch (checked here, once, in the driver: a bad
    row found inside a worker pool would stop the run far from its cause): text for token models; for the others
    rows of numbers, every row the same length."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_dictionary(t):  # a pandas categorical: the same strings, stored once each
        column, t = column.cast(t.value_type), t.value_type
    if spec.kind == "tokens":
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise SpecError("--input", f"the {col!r} column must hold a string per row, got {t}")
        if column.null_count:
            raise SpecError("--input", f"the {col!r} column has {column.null_count} empty (null) rows; every row "
                            "needs its text")  # fmt: skip
        try:  # pyarrow's JSON reader passes bad bytes on; a worker failed on them
            column.validate(full=True)
        except pa.ArrowInvalid as exc:
            where = str(exc).split("Invalid: ")[-1]
            raise SpecError("--input", f"the {col!r} column holds text that is not UTF-8 ({where}); save the file "
                            "as UTF-8") from None  # fmt: skip
        return
    lists = pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
    if not lists or not (pa.types.is_integer(t.value_type) or pa.types.is_floating(t.value_type)):
        raise SpecError("--input", f"the {col!r} column must hold a list of numbers per row, got {t}")
    lengths = pc.list_value_length(column)
    if column.null_count or lengths.null_count:
        raise SpecError("--input", f"the {col!r} column has empty (null) rows; every row needs its values")
    if not len(column):
        return
    lo, hi = pc.min(lengths).as_py(), pc.max(lengths).as_py()
    if lo != hi:
        raise SpecError("--input", f"the {col!r} column's rows hold {lo} to {hi} values; every row must hold the "
                        "same number")  # fmt: skip
    values = pc.list_flatten(column)
    if values.null_count:  # pc.is_finite skips them; the model read them as NaN
        raise SpecError("--input", f"the {col!r} column holds {values.null_count} empty (null) values; every value "
                        "must be a number")  # fmt: skip
    if pa.types.is_floating(values.type) and not pc.all(pc.is_finite(values)).as_py():  # wrote "score": nan
        raise SpecError("--input", f"the {col!r} column holds NaN or infinite values; every value must be finite")
    need = spec.features if spec.kind == "features" else spec.image_size**2 * 3
    if lo != need:
        side = spec.image_size
        what = f"{need} features" if spec.kind == "features" else f"{side}x{side}x3 pixels = {need} values"
        raise SpecError("--input", f"the {col!r} column's rows hold {lo} values, but the model takes {what} per "
                        "item; give rows of that width (or the spec's input: that matches your data)")  # fmt: skip


def table_batch(table: Any, spec: ItemSpec) -> Batch:
    """A pyarrow Table (slice) -> numpy batch in the read format."""
    col = PAYLOAD_COLUMN[spec.kind]
    ids = table.column("id").to_numpy().astype(np.int64)
    values = table.column(col).to_pylist()
    if spec.kind == "tokens":
        return {"id": ids, "text": np.array(values, dtype=object)}
    dtype = np.uint8 if spec.kind == "image" else np.float32
    try:
        return {"id": ids, col: np.array(values, dtype=dtype)}
    except (ValueError, TypeError, OverflowError):  # ragged rows, nulls, strings, values past the dtype
        raise SpecError("--input", f"the {col!r} column must hold rows of one shape of numbers ({np.dtype(dtype)}); "
                        f"rows {int(ids[0])}-{int(ids[-1])} do not") from None  # fmt: skip
