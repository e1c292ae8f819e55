"""The placeholder full-job projection: numbers from an inline four-row catalog."""

from __future__ import annotations

import pytest

from rightsize.catalog import Accelerator, Catalog, CpuFamily, Instance
from rightsize.cluster.projection import StageCosts, match_accelerator, project_job

LOCAL = CpuFamily("local", "amd", ("avx2",), {"fp32": 32.0, "bf16": 32.0, "int8": 64.0}, 2.0, 100.0, "test", "2025-01")
FAST = CpuFamily("fast", "intel", ("avx2",), {"fp32": 64.0, "bf16": 64.0, "int8": 128.0}, 3.0, 200.0, "test", "2025-01")
GPU = Accelerator("A10G", 24.0, 600.0, {"fp32": 31.0, "fp16": 70.0, "bf16": 70.0}, 300.0, "test", "2025-01")


def _inst(
    name: str, cores: int, fam: str, acc: str | None = None, price: float = 1.0, spot: float | None = None
) -> Instance:
    return Instance(
        "aws", "us-east-1", name, cores * 2, 16.0, fam, acc, 1 if acc else 0, price, spot, None, "2025-06", "test"
    )


CATALOG = Catalog(
    accelerators={"A10G": GPU},
    cpus={"local": LOCAL, "fast": FAST},
    instances=(_inst("slow.4", 4, "local", price=0.4), _inst("fast.8", 8, "fast", price=1.0, spot=0.3),
               _inst("g.1", 4, "local", "A10G", price=1.2)),
)  # fmt: skip


def test_cpu_instance_scales_by_cores_clock_and_flops() -> None:
    costs = StageCosts(io_core_s=1e-4, infer_s=4e-4, device="cpu", precision="fp32")
    rows = {
        r.instance_type: r for r in project_job(list(CATALOG.instances), CATALOG, costs, 3_600_000, local_cpu=LOCAL)
    }
    assert rows["slow.4"].items_per_s == pytest.approx(4 / 5e-4)  # same family: cores / (io + infer)
    # fast: io scales with the clock (3/2), inference with per-core peak (64*3 / 32*2 = 3x)
    assert rows["fast.8"].items_per_s == pytest.approx(8 / (1e-4 / 1.5 + 4e-4 / 3))
    assert rows["slow.4"].runtime_h == pytest.approx(3_600_000 / 8000 / 3600)
    assert rows["fast.8"].spot_cost_usd == pytest.approx(rows["fast.8"].runtime_h * 0.3)


def test_gpu_instance_is_bounded_by_its_cpu_input_pipeline() -> None:
    local_peak = 32 * 2e9  # one local core, fp32 FLOP/s
    costs = StageCosts(io_core_s=1e-3, infer_s=1e-2, device="cpu", precision="fp32")
    (row,) = [r for r in project_job(list(CATALOG.instances), CATALOG, costs, 1000, local_cpu=LOCAL) if r.accelerator]
    gpu_rate = 31e12 / (1e-2 * local_peak)
    assert gpu_rate > 4 / 1e-3 and row.items_per_s == pytest.approx(4 / 1e-3)  # input pipeline: 4 cores x 1 ms/item
    assert row.bottleneck == "input pipeline (CPU)" and row.accelerator == "1x A10G"
    light = StageCosts(io_core_s=1e-9, infer_s=1e-2, device="cpu", precision="fp32")
    (row,) = [r for r in project_job(list(CATALOG.instances), CATALOG, light, 1000, local_cpu=LOCAL) if r.accelerator]
    assert row.items_per_s == pytest.approx(gpu_rate) and row.bottleneck == "inference"


def test_deadline_sets_instance_count_and_order() -> None:
    costs = StageCosts(io_core_s=1e-4, infer_s=4e-4, device="cpu", precision="fp32")
    rows = project_job(list(CATALOG.instances), CATALOG, costs, 100_000_000, local_cpu=LOCAL, deadline_hours=0.5,
                       max_instances=3)  # fmt: skip
    by = {r.instance_type: r for r in rows}
    slow = by["slow.4"]  # 8000 items/s -> 3.47 h on one -> 7 instances for 0.5 h, over the cap of 3
    assert slow.runtime_h == pytest.approx(100_000_000 / 8000 / 3600)
    assert slow.meets_deadline is False and slow.instances == 3
    assert rows[-1].meets_deadline is False  # those missing the deadline sort last
    assert all(r.cost_usd == pytest.approx(r.runtime_h * r.price_usd_per_hour) for r in rows)


def test_gpu_measurements_do_not_project_cpu_instances() -> None:
    costs = StageCosts(io_core_s=1e-4, infer_s=1e-4, device="cuda", precision="bf16")
    rows = project_job(list(CATALOG.instances), CATALOG, costs, 1000, local_cpu=LOCAL, local_gpu=GPU)
    assert [r.instance_type for r in rows] == ["g.1"]
    assert rows[0].items_per_s == pytest.approx(min(1 / 1e-4, 4 / 1e-4))  # same GPU: measured rate


def test_match_accelerator_by_device_name() -> None:
    assert match_accelerator(CATALOG, "NVIDIA A10G") is GPU
    assert match_accelerator(CATALOG, "NVIDIA H200") is None and match_accelerator(CATALOG, None) is None


def test_service_curve_rates_replace_the_placeholder_inference() -> None:
    costs = StageCosts(io_core_s=1e-3, infer_s=1.0, device="cpu", precision="fp32")  # infer_s unused with curves

    def rate(inst: Instance) -> tuple[float, str]:
        return (500.0, "measured") if inst.accelerator is None else (9000.0, "projected")

    rows = {r.instance_type: r for r in project_job(list(CATALOG.instances), CATALOG, costs, 1000, local_cpu=LOCAL,
                                                    infer_rate=rate)}  # fmt: skip
    assert rows["slow.4"].items_per_s == pytest.approx(1 / (1 / 500 + 1e-3 / 4))  # stages share the 4 cores
    assert rows["fast.8"].items_per_s == pytest.approx(1 / (1 / 500 + 1e-3 / (8 * 1.5)))
    assert rows["g.1"].items_per_s == pytest.approx(4000.0) and rows["g.1"].bottleneck == "input pipeline (CPU)"
    assert rows["slow.4"].provenance.startswith("measured: inference from a ServiceCurve")
