"""Synthetic items are a pure function of their id; preprocessing makes the model's input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rightsize.cluster.items import (
    CLS_ID,
    PAD_ID,
    ItemSpec,
    preprocess,
    read_table,
    synthetic_read,
    table_batch,
    tokenize,
)
from rightsize.cluster.stages import add_time, stage_totals
from rightsize.errors import SpecError


def test_items_depend_only_on_their_id() -> None:
    for spec, col in [(ItemSpec("tokens", seq_len=8, vocab=100), "text"), (ItemSpec("image", image_size=8), "image"),
                      (ItemSpec("features", features=10), "features")]:  # fmt: skip
        whole = synthetic_read(spec, np.arange(10))
        part = synthetic_read(spec, np.array([7, 3]))
        assert np.array_equal(part["id"], [7, 3])
        assert np.array_equal(np.asarray(part[col][0]), np.asarray(whole[col][7]))
        assert not np.array_equal(np.asarray(whole[col][0]), np.asarray(whole[col][1]))


def test_preprocess_shapes_and_ranges() -> None:
    tok = preprocess(
        ItemSpec("tokens", seq_len=8, vocab=100), synthetic_read(ItemSpec("tokens", seq_len=8, vocab=100), np.arange(4))
    )
    assert tok["x"].shape == (4, 8) and tok["x"].dtype == np.int64
    assert (tok["x"][:, 0] == CLS_ID).all() and tok["x"].min() >= 0 and tok["x"].max() < 100
    img_spec = ItemSpec("image", image_size=8)
    img = preprocess(img_spec, synthetic_read(img_spec, np.arange(3)))
    assert img["x"].shape == (3, 3, 8, 8) and img["x"].dtype == np.float32 and abs(float(img["x"].mean())) < 1.0
    feat_spec = ItemSpec("features", features=50)
    feat = preprocess(feat_spec, synthetic_read(feat_spec, np.arange(5)))
    assert np.allclose(feat["x"].mean(axis=1), 0, atol=1e-5) and np.allclose(feat["x"].std(axis=1), 1, atol=1e-3)
    assert set(feat) == {"id", "x"}


def test_tokenize_pads_and_truncates() -> None:
    ids = tokenize(np.array(["a b", "a b c d e f"], dtype=object), seq_len=4, vocab=50)
    assert ids[0, 3] == PAD_ID and ids[0, 1] == ids[1, 1] and (ids[1] != PAD_ID).all()


def test_stage_time_columns_sum_to_the_stage_total() -> None:
    batch = add_time({"id": np.arange(4)}, "infer", wall_s=2.0, cpu_s=1.0)
    batch = add_time(batch, "read", wall_s=0.4, cpu_s=0.4)
    totals = stage_totals(batch)
    assert totals["infer"] == {"wall_s": 2.0, "cpu_s": 1.0} and totals["read"]["wall_s"] == 0.4


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        ("empty.jsonl", b"", r"empty.jsonl' has no rows; give one row per item"),  # as a file of blank lines says
        ("broken.jsonl", b"{bad\n", r"cannot read .* as JSON lines"),
        ("line2.jsonl", b'{"features": [1, 2]}\n{"features": \n', r"JSON parse error: .* on line 2\)"),  # not "row 1"
        ("huge.jsonl", b'{"features": [1, 1e400]}\n', r"cannot read .* as JSON lines"),
        ("mixed.jsonl", b'{"features": 1}\n{"features": [1, 2]}\n', r"cannot read .* as JSON lines"),
        ("noise.parquet", b"\x00\x01 not parquet at all \xff" * 8, r"cannot read .* as Parquet \("),
        ("ragged.jsonl", b'{"features": [1, 2]}\n{"features": [1]}\n', r"'features' column.s rows hold 1 to 2 values"),
        ("strings.jsonl", b'{"features": ["a", "b"]}\n', r"'features' column must hold a list of numbers per row"),
        ("wide.jsonl", b'{"features": [1, 2, 3]}\n', r"'features' column.s rows hold 3 values, but the model takes 2 "),
        ("nulls.jsonl", b'{"features": [1, 2]}\n{"features": null}\n', r"'features' column has empty \(null\) rows"),
        # found by an audit: a worker's traceback, truncated ids (every item "missing"), "duplicates", "nan" scores
        ("strid.jsonl", b'{"id": "a", "features": [1, 2]}\n', r"'id' column must hold whole numbers, got string"),
        (
            "nullid.jsonl",
            b'{"id": 1, "features": [1, 2]}\n{"id": null, "features": [1, 2]}\n',
            r"'id' column has 1 empty \(null\) rows",
        ),
        ("nan.jsonl", b'{"features": [1, NaN]}\n', r"holds NaN or infinite values"),
        ("hole.jsonl", b'{"features": [1, null]}\n', r"holds 1 empty \(null\) values"),
        ("fracid.jsonl", b'{"id": 1.5, "features": [1, 2]}\n', r"'id' column must hold whole numbers within"),
        ("nothing.jsonl", b"\n", r"nothing.jsonl' has no rows; give one row per item"),
    ],
)
def test_a_bad_input_file_is_one_spec_error_not_an_arrow_traceback(
    tmp_path: Path, name: str, content: bytes, pattern: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    spec = ItemSpec("features", features=2)
    with pytest.raises(SpecError, match=pattern) as info:
        table_batch(read_table(path, spec), spec)
    assert str(info.value).startswith("--input: ") and "\n" not in str(info.value)


def test_a_folder_is_named_as_one(tmp_path: Path) -> None:
    """--input /tmp said "must be a .parquet or .jsonl file, got 'tmp'": the path lost, no word of a folder."""
    with pytest.raises(SpecError, match=r"^--input: '/.*' is a folder; give a \.parquet or \.jsonl file$"):
        read_table(tmp_path, ItemSpec("features", features=2))


def test_text_that_is_not_utf8_or_a_zero_row_parquet_is_refused_in_the_driver(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "fine"}\n{"text": "\xff\xfe"}\n')
    tokens = ItemSpec("tokens", seq_len=8, vocab=100)
    with pytest.raises(SpecError, match=r"'text' column holds text that is not UTF-8 \(Invalid UTF8 sequence at "):
        read_table(bad, tokens)
    big = tmp_path / "big.parquet"  # uint64 ids past int64: refused, not wrapped
    pq.write_table(pa.table({"id": pa.array([2**64 - 1], pa.uint64()), "text": ["a"]}), big)
    with pytest.raises(SpecError, match=r"ids past 2\^63 - 1"):
        read_table(big, tokens)
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), empty)
    with pytest.raises(SpecError, match=r"has no rows; give one row per item"):
        read_table(empty, tokens)
    cats = tmp_path / "cats.parquet"  # a pandas categorical: dictionary-encoded strings
    pq.write_table(pa.table({"text": pa.array(["a", "b", "a"]).dictionary_encode()}), cats)
    assert table_batch(read_table(cats, tokens), tokens)["text"].tolist() == ["a", "b", "a"]


def test_a_jsonl_line_longer_than_a_mib_is_read(tmp_path: Path) -> None:
    """pyarrow's 1 MiB default block refused a valid file whose one line was 10 MB ("straddling object")."""
    long = tmp_path / "long.jsonl"
    long.write_text('{"text": "' + "w " * 1_000_000 + '"}\n{"text": "short"}\n')
    tokens = ItemSpec("tokens", seq_len=8, vocab=100)
    assert read_table(long, tokens).num_rows == 2


def test_whole_float_ids_are_ids_and_a_categorical_with_nulls_names_them(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    spec = ItemSpec("features", features=2)
    f = tmp_path / "ids.jsonl"
    f.write_text('{"id": 1.0, "features": [1, 2]}\n{"id": 7.0, "features": [3, 4]}\n')  # a JSON writer's floats
    assert table_batch(read_table(f, spec), spec)["id"].tolist() == [1, 7]
    cats = tmp_path / "cats.parquet"
    pq.write_table(pa.table({"text": pa.array(["a", None, "b"]).dictionary_encode()}), cats)
    with pytest.raises(SpecError, match=r"'text' column has 1 empty \(null\) rows"):
        read_table(cats, ItemSpec("tokens", seq_len=8, vocab=100))
