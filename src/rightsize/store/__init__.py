"""SQLite results store: runs, environments, measurements and artifacts (plans, load tests)."""

from rightsize.store.db import RunInfo, Store, default_store_path

__all__ = ["RunInfo", "Store", "default_store_path"]
