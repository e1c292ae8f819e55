"""Hand-built catalog rows and service curves for planner tests (no real models, no files)."""

from __future__ import annotations

from rightsize.catalog.model import Accelerator, Catalog, Instance
from rightsize.profile import ServiceCurve

BATCHES = (1, 2, 4, 8, 16, 32)


def instance(
    name: str,
    price: float,
    vcpus: int = 8,
    ram_gib: float = 16,
    acc: str | None = None,
    count: int = 0,
    spot: float | None = None,
    bucket: str | None = None,
    provider: str = "aws",
) -> Instance:
    return Instance(
        provider=provider,
        region="us-east-1",
        instance_type=name,
        vcpus=vcpus,
        ram_gib=ram_gib,
        cpu_family="intel-icelake",
        accelerator=acc,
        accelerator_count=count if acc else 0,
        on_demand_usd_per_hour=price,
        spot_usd_per_hour=spot,
        spot_interruption=bucket,
        price_date="2025-06",
        source="test row",
    )


ACCELERATORS = {
    "T4": Accelerator("T4", 16, 320, {"fp32": 8.1, "fp16": 65}, 70, "test", "2025-06"),
    "A100-80GB": Accelerator("A100-80GB", 80, 2039, {"fp32": 19.5, "fp16": 312}, 400, "test", "2025-06"),
}


def cpu_curve(name: str, t1_ms: float, per_sample_ms: float, precision: str = "fp32", cv: float = 0.1) -> ServiceCurve:
    """t(b) = t1 + per_sample (b - 1): CPUs gain little from batching."""
    lat = tuple(t1_ms + per_sample_ms * (b - 1) for b in BATCHES)
    return ServiceCurve(f"cpu:{name}", precision, BATCHES, lat, (cv,) * len(BATCHES), "measured", instance=name)


def gpu_curve(
    acc: str, fixed_ms: float, per_sample_ms: float, precision: str = "fp16", cv: float = 0.05
) -> ServiceCurve:
    """t(b) = fixed + per_sample b: a large fixed overhead, cheap extra samples."""
    lat = tuple(fixed_ms + per_sample_ms * b for b in BATCHES)
    return ServiceCurve(acc, precision, BATCHES, lat, (cv,) * len(BATCHES), "projected", 0.8, 1.25)


def small_catalog() -> Catalog:
    """Four rows: two CPU sizes, one small GPU, one big GPU; the shipped power and grid tables (energy)."""
    from rightsize.catalog import load_catalog

    return Catalog(
        accelerators=dict(ACCELERATORS),
        cpus={},
        instances=(
            instance("c.2x", 0.34, vcpus=8, ram_gib=16, spot=0.15, bucket="<5%"),
            instance("c.4x", 0.68, vcpus=16, ram_gib=32, spot=0.30, bucket="<5%"),
            instance("g.t4", 0.53, vcpus=4, ram_gib=16, acc="T4", count=1, spot=0.19, bucket="5-10%"),
            instance("p.a100", 3.67, vcpus=12, ram_gib=85, acc="A100-80GB", count=1, spot=1.44, bucket="5-10%"),
        ),
        power=load_catalog("").power,
    )


def tiny_online_spec(name: str, rate_per_s: float = 10, extra: str = "") -> str:
    """YAML of a tiny DistilBERT online spec that measures in seconds (for end-to-end CLI tests)."""
    return (
        f"name: {name}\nmodel: distilbert\ntiny: true\ninput: {{seq_len: 16}}\nbatch_sizes: [1, 4]\n{extra}"
        "timing: {max_time_s: 0.5, max_repeats: 20}\n"
        f"targets:\n  online: {{rate_per_s: {rate_per_s:g}, latency: {{percentile: 95, bound_ms: 200}}}}\n"
    )


def printed_plan(result: object, top: int = 3) -> list[str]:
    """The lines `rightsize plan` prints for ``result`` (a PlanResult), from a wide recording console."""
    from rich.console import Console

    from rightsize.cli import plan as cli_plan

    console = Console(width=400, record=True)
    original = cli_plan.out_console
    cli_plan.out_console = console
    try:
        cli_plan.print_plan(result, top)  # type: ignore[arg-type]
    finally:
        cli_plan.out_console = original
    return console.export_text().splitlines()
