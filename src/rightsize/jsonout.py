"""JSON for people's tools: dataclasses, pydantic models and paths serialised; NaN and infinities as null.

One rule for ``--json`` on the CLI, the Python API's ``to_json`` and the dashboard's API.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

__all__ = ["to_dataframe", "to_json"]


def _default(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def to_json(obj: Any) -> str:
    """Serialise dataclasses, pydantic models and paths; NaN/inf become null."""
    return json.dumps(_sanitize(json.loads(json.dumps(obj, default=_default))), indent=2)


def to_dataframe(rows: list[dict[str, Any]]) -> Any:
    """``rows`` (flat dicts) as a pandas DataFrame; a one-line error naming the fix when pandas is missing."""
    try:
        import pandas as pd
    except ImportError:
        from rightsize.errors import UnsupportedError

        raise UnsupportedError("to_dataframe needs pandas: pip install pandas (or use .rows())") from None
    return pd.DataFrame(rows)


def html_table(rows: list[dict[str, Any]], cols: list[str], limit: int = 10) -> str:
    """A notebook's ``_repr_html_`` table of ``rows``' ``cols``: the first ``limit`` rows, and a line counting the
    rest (a profile or plan of hundreds of rows is ``to_dataframe``'s)."""
    import html

    def cell(v: Any) -> str:
        return html.escape(f"{v:.3g}" if isinstance(v, float) else "-" if v is None else str(v))

    body = "".join("<tr>" + "".join(f"<td>{cell(r[c])}</td>" for c in cols) + "</tr>" for r in rows[:limit])
    more = f"<i>{len(rows) - limit} more: .to_dataframe()</i>" if len(rows) > limit else ""
    return "<table><tr>" + "".join(f"<th>{c}</th>" for c in cols) + f"</tr>{body}</table>{more}"


def _sanitize(obj: Any) -> Any:
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    if isinstance(obj, dict):
        return {k: _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_sanitize(v) for v in obj]
    return obj
