"""Which of a config's stored results stands for it (``Store.profiles``, ``Store.find_measurement``)."""

from __future__ import annotations

from rightsize.profile import Measurement

__all__ = ["newer_wins"]


def _clean_ok(m: Measurement) -> bool:
    return m.status == "ok" and not m.extra.get("contended")  # measure.quality.is_contended's rule


def newer_wins(older: Measurement, newer: Measurement) -> bool:
    """Whether a config's newer stored result stands for it instead of the older one: yes, unless the newer one was
    timed on a busy CPU (``extra.contended``) and the older one was clean. A busy re-measurement (``bench --fresh``
    beside other work) is a disturbed reading of the same config; letting it shadow the clean one made the next
    sweep measure again with no clean GFLOP/s reference, and plans read the disturbed timing. Nor does a failure
    under ``bench --memory-limit`` (``extra.memory_limit_bytes``) hide a result that ran: the cap emulated a
    smaller machine, and plans without it read "out of memory" for a config that fits."""
    if newer.status == "failed" and newer.extra.get("memory_limit_bytes") and older.status == "ok":
        return False
    return not (_clean_ok(older) and newer.status == "ok" and not _clean_ok(newer))
