"""Energy and CO2e of a candidate: watts from the catalog's power table at the plan's utilization.

    watts(instance) = CPU: vCPUs x (min + u (max - min))          per-vCPU watts by CPU family
                      GPU: n x (min + u s d (max - min)) + host CPU per-device watts; host: idle vCPUs + one busy
                                                                    vCPU per GPU while the replica serves
                      + RAM GiB x 0.392 W                           memory
    kWh per hour    = count x watts / 1000 x PUE                    the cloud's power usage effectiveness
    CO2e            = kWh x the region's grid factor (kg CO2e per kWh)

The method and every coefficient are Cloud Carbon Footprint's (catalog/data/power.csv, grid.csv, each
row with its source); families it has no numbers for use a named proxy, GPUs without a row get CCF's
typical min/max ratio applied to the datasheet TDP. u is the planner's own prediction: an online
replica's busy fraction, 1 for batch and training (the device works for the whole runtime). s is the share of
a batch's time the GPU computes (the projected curve's device part over its batch time, at an online replica's
mean batch, or the batch a job or training step runs): an eager replica at batch 1-8 mostly waits for the host
to dispatch its ops. On an H100 (benchmarks/energy.py against 20 NVML readings) u x s took the median error
from 83% to 30%. d = m + (1 - m) c is the draw of that device time: c is the share of it the math units work (each
kernel's FLOPs at the attainable rate: all of a compute-bound kernel, the FLOP term's share of one that streams
memory; ``timemodel.gpu_time_split_ms``, ``StepCosts.prefill_split`` / ``decode_split``), and time spent only
streaming memory draws m of the dynamic range (MEMORY_BOUND_DRAW): at a full device an eager ResNet-50 (c 0.3-0.4)
drew 429-556 W on an H100 where BERT-base in fp32 (c 0.9) drew 647-689 W. The draw is continuous at the roofline's
ridge: a kernel just short of compute-bound draws almost what a compute-bound one does (an earlier rule counted only
compute-bound kernels, so an LLM decode step drew m up to the ridge and 1 past it; against the 53 ML.ENERGY H100
serving readings, never fitted, median error at 128 / 2048 prompt tokens 17% / 9% -> 12% / 6%, worst 38% / 20% ->
29% / 22%; docs/planning.md).
"""

from __future__ import annotations

from rightsize.catalog.model import Accelerator, Instance, PowerTable
from rightsize.plan.result import Candidate, Energy
from rightsize.plan.verify import spare_instances

# CCF's GPUs draw min/max = 8/71 (T4), 18/153 (A10G), 35/306 (V100), 46/407 (A100): ~0.115 at idle, and
# max about 1.02 x the datasheet TDP; used for GPUs power.csv has no row for (named in the note).
GPU_IDLE_FRACTION = 0.115
GPU_MAX_OVER_TDP = 1.02
# m: the share of a GPU's dynamic power range that time spent only streaming memory draws. From outside readings
# only: the median of m solved, by this rule, from ML.ENERGY v3's Zeus (NVML) readings of vLLM decoding on H100s at
# 8-16 sequences, at 128 and at 2048 prompt tokens (their lengths are not published): 24 values, 0.45-0.75, median
# 0.553 (llm/data/llm_power_references.csv, each row with its source URL and date; benchmarks/energy.py
# outside_memory_draw). Never fitted to our own readings: against the 20 NVML readings of
# benchmarks/gpu/results/h100-power-2026-11-26 (ResNet-50 and BERT-base, fp32 and bf16, batch 1-256, each over >= 1 s
# of runs) it comes out at median 8%, worst 24% (the 25% target, held out). Until 2026-11-26 (tenth session)
# m was fitted to those 20 readings instead (0.56), where each model judged by an m fitted on the other alone came
# out at 16% / 39%.
MEMORY_BOUND_DRAW = 0.55


def vcpu_watts(table: PowerTable, family: str | None) -> tuple[float, float, bool]:
    """(idle, full) watts per vCPU of a CPU family, and whether Cascade Lake's stood in (no row for it)."""
    if family in table.cpu:
        lo, hi = table.cpu[family]
        return lo, hi, False
    lo, hi = table.cpu.get("intel-cascade-lake", (0.64, 3.97))
    return lo, hi, True


def gpu_watts(table: PowerTable, name: str, accelerators: dict[str, Accelerator]) -> tuple[float, float, float | None]:
    """(idle, full) watts of one GPU: its CCF row, else the datasheet TDP proxy; the TDP when the proxy was used."""
    if name in table.gpu:
        lo, hi = table.gpu[name]
        return lo, hi, None
    acc = accelerators.get(name)
    tdp = acc.tdp_w if acc is not None else 300.0
    return tdp * GPU_MAX_OVER_TDP * GPU_IDLE_FRACTION, tdp * GPU_MAX_OVER_TDP, tdp


def instance_watts(
    inst: Instance,
    utilization: float,
    table: PowerTable,
    accelerators: dict[str, Accelerator],
    device_share: float = 1.0,
    compute_share: float = 1.0,
) -> tuple[float, list[str]]:
    """Power draw of one instance at ``utilization`` (0..1) of its compute, and notes on proxies used. A GPU
    computes for ``device_share`` of its busy time (the rest it waits on the host, whose feeding vCPU is busy), and
    its math units ``compute_share`` of that (time only streaming memory draws MEMORY_BOUND_DRAW of the range)."""
    u = min(1.0, max(0.0, utilization))
    notes: list[str] = []
    cpu_min, cpu_max, proxied = vcpu_watts(table, inst.cpu_family)
    if proxied:
        notes.append(f"CPU family {inst.cpu_family or 'unknown'}: Cascade Lake watts used")
    memory = inst.ram_gib * table.memory_w_per_gib
    if inst.accelerator is None:
        return inst.vcpus * (cpu_min + u * (cpu_max - cpu_min)) + memory, notes
    g_min, g_max, tdp = gpu_watts(table, inst.accelerator, accelerators)
    if tdp is not None:
        notes.append(f"{inst.accelerator}: {GPU_IDLE_FRACTION:.1%}-{GPU_MAX_OVER_TDP:.0%} of its {tdp:g} W TDP")
    n = inst.accelerator_count
    busy_host = min(n, inst.vcpus) * u * (cpu_max - cpu_min)  # one host vCPU feeds each working GPU
    u_gpu = u * min(1.0, max(0.0, device_share)) * gpu_draw(compute_share)
    return n * (g_min + u_gpu * (g_max - g_min)) + inst.vcpus * cpu_min + busy_host + memory, notes


def gpu_draw(compute_share: float, memory_draw: float = MEMORY_BOUND_DRAW) -> float:
    """Share of a working GPU's dynamic power range it draws when its math units work ``compute_share`` of its time
    (``memory_draw``: what time spent only streaming memory draws; benchmarks/energy.py re-fits it held out)."""
    c = min(1.0, max(0.0, compute_share))
    return memory_draw + (1.0 - memory_draw) * c


def add_energy(
    cands: list[Candidate],
    instances: dict[tuple[str, str, str], Instance],
    accelerators: dict[str, Accelerator],
    kind: str,
    rate_per_s: float | None = None,
    *,
    table: PowerTable,
    epochs: float | None = None,
) -> None:
    """Fill ``Candidate.energy`` for every candidate whose instance is known (in place), from ``table`` (the
    catalog's power and grid rows). A job's spin-up (provision, image pull, model load) draws the idle floor, not
    the busy power; ``epochs`` (training) adds one epoch's energy, the job's work without its spin-up."""
    for c in cands:
        inst = instances.get((c.provider, c.region, c.instance))
        if inst is None:
            continue
        if kind == "online":
            u = c.latency.utilization if c.latency is not None else 0.5
        else:
            u = 1.0
        share: float | None = None
        compute: float | None = None
        batch = c.latency.mean_batch if kind == "online" and c.latency is not None else None
        if kind != "online" and c.batching is not None:  # batch jobs and training: the batch each step runs
            batch = c.batching.max_batch
        if c.curve is not None and c.curve.device_share is not None and batch is not None:
            # A busy replica or worker is not a GPU busy computing: at small batches it waits for the host to
            # dispatch eager ops (H100, 20 NVML readings: median error 83% -> 30% with this share; docs/planning.md).
            share = c.curve.device_share_at(batch)
        if c.curve is not None and c.curve.compute_share is not None and batch is not None:
            compute = c.curve.compute_share_at(batch)  # memory-bound kernels draw less (module docstring)
        watts, notes = instance_watts(
            inst, u, table, accelerators, 1.0 if share is None else share, 1.0 if compute is None else compute
        )
        spare = spare_instances(c) if kind == "online" else 0
        spare_watts = instance_watts(inst, 0.0, table, accelerators)[0] * spare  # it stands by: the idle draw
        watts = watts * (max(1, c.count) - spare) + spare_watts
        pue, kg, site = table.site(c.provider, c.region)
        kwh_per_hour = watts / 1000.0 * pue
        per_epoch, up_h, idle_watts = None, 0.0, 0.0
        if kind == "online" and rate_per_s:
            basis, kwh = "per 1M requests", kwh_per_hour / (rate_per_s * 3600.0) * 1e6
        elif c.runtime_hours is not None:
            up_h = min(c.runtime_hours, (c.cold_start_s or 0.0) / 3600.0)
            idle_watts = instance_watts(inst, 0.0, table, accelerators)[0] * max(1, c.count)
            work_kwh = kwh_per_hour * (c.runtime_hours - up_h)
            basis, kwh = "job", work_kwh + idle_watts / 1000.0 * pue * up_h
            per_epoch = work_kwh / epochs if epochs else None
        else:
            basis, kwh = "per hour", kwh_per_hour
        c.energy = Energy(
            watts=round(watts, 1), utilization=round(u, 4), kwh_per_hour=_sig(kwh_per_hour), basis=basis,
            kwh=_sig(kwh), co2e_kg=_sig(kwh * kg), pue=pue, grid_kg_per_kwh=kg,
            notes=[site, *notes], device_share=None if share is None else round(share, 3),
            compute_share=None if compute is None else round(compute, 3),
            kwh_per_epoch=None if per_epoch is None else _sig(per_epoch),
            spin_up_min=round(up_h * 60, 2) if up_h else None, idle_watts=round(idle_watts, 1) if up_h else None,
            spare_watts=round(spare_watts, 1) if spare else None,
        )  # fmt: skip


def _sig(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant digits: four decimals of a kWh had read 0 for a 3-minute job's epoch."""
    return float(f"{value:.{digits}g}")


def format_energy(kwh: float) -> str:
    """kWh to three significant digits, in Wh below 10 Wh (a small CPU job's 0.0013 Wh per epoch had read 0 kWh)."""
    return f"{kwh * 1000:.3g} Wh" if kwh < 0.01 else f"{kwh:.3g} kWh"


def format_co2e(kg: float) -> str:
    """kg CO2e to three significant digits, in grams below 10 g."""
    return f"{kg * 1000:.3g} g" if kg < 0.01 else f"{kg:.3g} kg"


def _short(value: float) -> str:
    """Whole units from 10 up, two significant digits below (2.6 min, not 3; 155 min, not 1.6e+02)."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def energy_line(e: Energy) -> str:
    """The recommendation's energy line: kWh on its basis, the watts and what they stand on, CO2e."""
    return (
        f"energy {format_energy(e.kwh)} {e.basis}"
        + (f", {format_energy(e.kwh_per_epoch)} per epoch" if e.kwh_per_epoch is not None else "")
        + f" ({e.watts:.0f} W at {e.utilization:.0%} busy"
        + (f", the GPU computing {e.device_share:.0%} of it" if e.device_share is not None else "")
        + (f", its math units {e.compute_share:.0%} of that" if e.compute_share is not None else "")
        + (f"; the spot spare instance idle at {e.spare_watts:.0f} W of that" if e.spare_watts else "")
        # two digits: a 2.66-minute job's 2.58-minute spin-up had read "spin-up 3 min"
        + (
            f"; spin-up {_short(e.spin_up_min)} min at the idle {_short(e.idle_watts or 0.0)} W"
            if e.spin_up_min
            else ""
        )
        + f", PUE {e.pue:g}), "
        f"{format_co2e(e.co2e_kg)} CO2e at {e.grid_kg_per_kwh * 1000:.0f} g/kWh ({e.notes[0] if e.notes else 'grid'})"
    )
