"""Hardware and price catalog: shipped CSV tables (catalog/data/) plus a user override file.

from rightsize.catalog import load_catalog, filter_instances
cat = load_catalog()                                   # + $RIGHTSIZE_CATALOG if set
gpus = filter_instances(cat.instances, providers=["aws"], device_class="gpu")
"""

from rightsize.catalog.load import ENV_VAR, load_catalog
from rightsize.catalog.model import PRECISIONS, Accelerator, Catalog, CpuFamily, Instance
from rightsize.catalog.query import (
    HOURS_PER_MONTH,
    check_filters,
    filter_instances,
    get_instance,
    gpu_memory_tiers,
    interruptions_per_hour,
    match_accelerator,
    match_cpu_family,
)

__all__ = [
    "ENV_VAR",
    "HOURS_PER_MONTH",
    "PRECISIONS",
    "Accelerator",
    "Catalog",
    "CpuFamily",
    "Instance",
    "check_filters",
    "filter_instances",
    "get_instance",
    "gpu_memory_tiers",
    "interruptions_per_hour",
    "load_catalog",
    "match_accelerator",
    "match_cpu_family",
]
