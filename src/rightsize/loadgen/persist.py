"""Keep load-test results in the results store (an artifact per run, kind ``loadtest``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["save_result"]


def _finite(obj: Any) -> Any:
    """NaN/inf become None so the payload is strict JSON."""
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def save_result(payload: dict[str, Any], store_path: str | Path | None = None, kind: str = "loadtest") -> str:
    """Save ``payload`` as a store artifact; returns its id. ``store_path`` None: the default store."""
    from rightsize.store import Store

    clean = _finite(json.loads(json.dumps(payload, default=str)))
    with Store(store_path) as store:
        return store.save_artifact(None, kind, clean)
