"""SQLite results store: runs, environments, measurements and artifacts (plans, load tests)."""

from rightsize.store.db import RunInfo, Store
from rightsize.store.opening import default_store_path

__all__ = ["RunInfo", "Store", "default_store_path"]
