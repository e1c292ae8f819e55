"""The recommendation's Check lines: the seed article's common mistakes (an idle GPU, no batching, memory headroom, a
CPU-bound input pipeline) and what the plan rests on (a projection's band, spot assumptions), for ``explain``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rightsize.plan.result import Candidate, PlanKind
from rightsize.plan.verify import spare_instances
from rightsize.units import format_share

__all__ = ["GPU_IDLE_UTILIZATION", "SAMPLES_PER_VCPU_PER_S", "band_words", "check_warnings", "host_bound_note"]

GPU_IDLE_UTILIZATION = 0.20  # seed: "Is GPU utilization consistently < 20%? Try CPU autoscaling."
MEMORY_HEADROOM = 0.80  # warn above 80% of device memory
NEAR_FULL_UTILIZATION = 0.90  # an online replica this busy has little slack left (queueing grows as 1/(1-u))
SAMPLES_PER_VCPU_PER_S = 300.0  # input pipeline rate per vCPU worth checking (assumption: ~JPEG decode)


FULL_BATCH_ROOM = 1.25  # a busy replica whose full batches serve this much more than the rate has room to grow


def check_warnings(
    kind: PlanKind,
    rec: Candidate,
    bound_ms: float | None,
    request_samples: int,
    input_measured: bool = False,
    samples_per_s: float | None = None,
) -> list[str]:
    """``request_samples``: the smallest request (a batch of more samples batches several requests);
    ``samples_per_s``: an online target's rate in samples (requests x their mean samples), against which a busy
    replica's full-batch capacity is its room."""
    out: list[str] = []
    if rec.device_class == "gpu" and kind == "online" and rec.latency is not None:
        if rec.latency.utilization < GPU_IDLE_UTILIZATION:
            out.append(
                f"GPU busy only {rec.latency.utilization:.0%}: under 20% means overbuying; it is still the cheapest "
                "plan that meets the SLO here, but re-check CPU autoscaling if the model or prices change"
            )
        if rec.batching and rec.batching.max_batch <= request_samples and rec.latency.utilization >= 0.3:
            out.append(
                f"no micro-batching while the GPU is {format_share(rec.latency.utilization)} busy: add a small batch "
                "window (5-10 ms) and re-plan; batching raises throughput at little latency cost"
            )
    lat, bat = rec.latency, rec.batching
    if kind == "online" and lat is not None and lat.utilization >= NEAR_FULL_UTILIZATION:
        # the serving replicas' full-batch capacity (a spot-only plan's spare instance stands by, serving nothing)
        serving = 1.0 - spare_instances(rec) / max(1, rec.count)
        capacity = (rec.throughput_per_s or 0.0) * serving
        room = capacity / samples_per_s if capacity and samples_per_s else 0.0
        if bat is not None and (bat.max_wait_ms > 0 or bat.max_batch <= 2 * lat.mean_batch):
            room = 0.0  # a window fills batches on purpose, or batches near full: little left to grow into
        if bat is not None and bat.max_batch > request_samples and room >= FULL_BATCH_ROOM:
            # a GPU with no batch window runs whatever is queued: busy at any load, its slack is in the batch size
            out.append(
                f"busy {format_share(lat.utilization)} though its full batches would serve {capacity:,.0f} samples/s, "
                f"{room:.1f}x the rate: with no batch window it runs whatever is queued, so it reads busy at any "
                f"load and extra traffic mostly grows its batches (mean {lat.mean_batch:.1f} of at most "
                f"{bat.max_batch}); `rightsize validate` checks it here"
            )
        elif bat is not None and bat.max_batch > request_samples and lat.mean_batch < bat.max_batch:
            out.append(
                f"busy {format_share(lat.utilization)}: it keeps up because batches grow with the load (mean "
                f"{lat.mean_batch:.1f} of at most {bat.max_batch} samples; replicas were sized for full batches "
                "under the headroom), but the latency rises steeply with any extra traffic or a slower server; "
                "check with `rightsize validate` and keep a replica in reserve if the rate can exceed the plan"
            )
        else:
            out.append(
                f"busy {format_share(lat.utilization)} with no room for bigger batches: any extra traffic queues; "
                "add a replica if the rate can exceed the plan"
            )
    if rec.memory_bytes and rec.memory_capacity_bytes:
        share = rec.memory_bytes / rec.memory_capacity_bytes
        if share > MEMORY_HEADROOM:
            out.append(
                f"memory headroom: the plan needs {share:.0%} of device memory; OOM risk from fragmentation and "
                "workspaces; log max allocated memory, or lower the batch / use mixed precision"
            )
    # the rule of thumb, unless the plan measured the input stage (`rightsize pipeline`: it had warned of a 300/s
    # JPEG-decode rate beside its own 21 us per item)
    if (
        rec.device_class == "gpu"
        and kind in ("batch", "training")
        and rec.throughput_per_s
        and rec.vcpus
        and not input_measured
    ):
        per_vcpu = rec.throughput_per_s / (rec.vcpus * max(1, rec.count))
        if per_vcpu > SAMPLES_PER_VCPU_PER_S:
            out.append(
                f"CPU-bound input pipeline risk: {per_vcpu:,.0f} samples/s per vCPU must be read and prepared on the "
                f"host (over {SAMPLES_PER_VCPU_PER_S:.0f}/s per vCPU: about what decoding JPEGs allows); use enough "
                "loader workers and prefetching, or an instance with more vCPUs per GPU; `rightsize pipeline` "
                "measures your own input stage"
            )
    if rec.provenance == "projected":
        out.append(
            f"projected, not measured on {rec.instance if rec.device == 'cpu' else rec.device} "
            f"({band_words(rec.band)}); "
            "check with `rightsize validate` before committing"
        )
    if kind == "online" and rec.latency and rec.latency.band_ms and bound_ms and rec.latency.band_ms[1] > bound_ms:
        out.append(
            f"at the pessimistic end of the band the percentile would be {rec.latency.band_ms[1]:.0f} ms "
            f"> {bound_ms:g} ms: consider one more replica"
        )
    if kind == "online" and rec.spot_interruptions_per_hour is not None:  # its rate, source and spare instance
        out += [n for n in rec.notes if n.startswith("spot")]
    if rec.purchase in ("spot", "mixed") and rec.spot:
        every = rec.spot.checkpoint_interval_min
        # the work, not the spin-up nor the interruptions' overhead: an 18-minute job of 12 minutes' work is over
        # before a 21-minute interval (older plans without work_hours: the runtime less the spin-up)
        work_h = rec.spot.work_hours
        runtime_min = (
            60.0 * work_h
            if work_h is not None
            else max(0.0, 60.0 * (rec.runtime_hours or 0.0) - (rec.cold_start_s or 0.0) / 60.0)
        )
        how = (
            "checkpoints cost nothing (checkpoint_minutes 0): save every step, an interruption loses only its restart"
            if every <= 0
            else f"checkpoint every {every:.0f} min (Young/Daly)"
            if not runtime_min or every < runtime_min
            else f"no checkpoint needed: Young/Daly's interval ({every:,.0f} min) is longer than the job "
            f"({runtime_min:,.0f} min of work); an interruption restarts it"
        )
        stalls = rec.spot.stalls_per_hour
        per = "" if stalls is None or stalls == rec.spot.interruptions_per_hour else (
            f" over the fleet ({stalls:.2g}/h per instance, each stalling only its own)")  # fmt: skip
        out.append(f"spot: {rec.spot.interruptions_per_hour:.2g} interruptions/h{per} assumed; {how}")
    return out


def band_words(band: tuple[float, float]) -> str:
    """The band in words: an online plan sized at its slow edge has band (lo/hi, 1)."""
    lo, hi = band
    if lo == hi == 1.0:  # scaled from a measured instance of its CPU family: "x1.00-x1.00" had read as a contradiction
        return "no band: scaled from timings measured here on its CPU family, which move between runs when busy"
    if hi == 1.0 and lo < 1.0:
        # a latency's fast edge is re-simulated, so its band reaches lower (less queueing): "p95 25 ms (band 6.3-25 ms)"
        # beside "down to x0.45" had read as a contradiction
        return (f"times shown are the slow edge of the projection band: batch times may be down to x{lo:.2f} of them, "
                "and latencies, queueing less, lower still (each one's band)")  # fmt: skip
    return f"true times may be x{lo:.2f}-x{hi:.2f} of those shown"


def host_bound_note(rec: Candidate | None, ranked: Sequence[Candidate], kind: PlanKind) -> str | None:
    """One line when the recommended GPU job, or the fastest GPU one, is projected host-bound (its eager ops take
    the host longer to dispatch than the GPU to run): A100, A100-80GB and H100 read the same 857 samples/s at 1.9x
    the price apart, and nothing said a faster GPU would not help."""
    if kind not in ("batch", "training"):
        return None
    timed = [c for c in ranked if c.device_class == "gpu" and c.runtime_hours is not None]
    fastest = min(timed, key=lambda c: (c.runtime_hours or 0.0, c.cost_usd_total or 0.0), default=None)
    for c in (rec, fastest):
        if c is None or c.device_class != "gpu" or c.curve is None or c.batching is None:
            continue
        b = c.batching.max_batch
        if c.curve.device_share_at(b) < 1.0:
            per = "step" if kind == "training" else "batch"
            host_ms = f"{c.curve.t_ms(b) * c.grad_accumulation:.2g}"
            return (f"host-bound: this {per} is limited by Python/dispatch on the host (~{host_ms} ms/{per} on "
                    f"{c.device}); a faster GPU will not speed it up; a larger batch per GPU or "
                    "torch.compile/CUDA graphs would")  # fmt: skip
    return None
