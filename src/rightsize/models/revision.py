"""Which revision of a user's model a measurement was taken of: a checksum of the file the model ref names.

A stored measurement is reused by its config's key. The key named a user's model by its ref alone, so editing the
factory's module, the ``config.json`` of an ``hf:./dir`` model or re-exporting ``model.onnx`` and planning again
planned from the old model's timings, with no word. The checksum joins the key (``measure.config.input_of``): an
edited model is a new model, measured again; an unchanged one is reused as before.

Only the file the ref names is read (a factory's own module, not what it imports). Zoo models and built-in Hugging
Face names (``hf:gpt2``) have no revision: their architecture is fixed by the installed packages' versions.
"""

from __future__ import annotations

import importlib.util
import zlib
from functools import lru_cache
from pathlib import Path

from rightsize.models.refs import config_dir, without_engine


def model_file(ref: str) -> Path | None:
    """The file that defines a user's model ref, or None (a zoo model, a built-in Hugging Face name, a ref that
    names nothing readable: resolving the model reports that)."""
    ref = without_engine(ref)
    if (directory := config_dir(ref)) is not None:
        return directory / "config.json"
    path = Path(ref[3:] if ref.startswith("hf:") else ref)  # hf: may name the config file itself
    try:
        if path.is_file():
            return path
    except OSError:
        return None
    if ref.startswith("hf:"):  # a built-in Hugging Face name: fixed by the installed transformers
        return None
    module_name, sep, attr = ref.partition(":")
    if not sep or not attr or not all(p.isidentifier() for p in module_name.split(".")):
        return None
    try:
        spec = importlib.util.find_spec(module_name)
    except Exception:  # its package failed to import: resolving the model reports that, in one line
        return None
    origin = spec.origin if spec is not None else None
    return Path(origin) if origin and origin.endswith(".py") and Path(origin).is_file() else None


def model_revision(ref: str) -> int | None:
    """A checksum (CRC-32) of the file defining ``ref`` (``model_file``), or None when there is none to read."""
    path = model_file(ref)
    if path is None:
        return None
    try:
        st = path.stat()
        return _checksum(str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        return None


@lru_cache(maxsize=64)
def _checksum(path: str, size: int, mtime_ns: int) -> int:
    """CRC-32 of the file's bytes; cached by size and mtime, so a plan reads a large ONNX file once."""
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc
