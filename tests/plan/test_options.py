"""What one replica may fill: a CPU worker's runtime and an int8 worker's load beside the estimated tensors."""

from __future__ import annotations

from dataclasses import replace

from plan_fixtures import cpu_curve, instance

from rightsize.memory_budget import CPU_RUNTIME_BYTES
from rightsize.plan.options import GIB, MemoryModel, pair_options


def test_a_cpu_worker_keeps_room_for_its_runtime_and_an_int8_one_for_its_float_copy_at_load() -> None:
    """On 4-8 GiB instances bert-large was planned at 1.25 GiB per fp32 worker (measured 1.63 GiB) and 0.4 GiB per
    int8 one (measured 3.2 GiB while quantizing): the estimate counts tensors, not the interpreter, torch and the
    server, nor the float model that quantize_dynamic deep-copies."""
    small = instance("s.large", 0.17, vcpus=4, ram_gib=4)
    big = instance("s.xlarge", 0.34, vcpus=8, ram_gib=8)
    fp32 = MemoryModel(1.25 * GIB, 0.01 * GIB)
    memory = {"fp32": fp32, "int8": MemoryModel(0.4 * GIB, 0.01 * GIB)}
    one, two = cpu_curve("s.large", 10, 1), replace(cpu_curve("s.large", 10, 1), workers=2)
    (solo,) = pair_options([small], [one], {}, memory)
    assert solo.usable_bytes == 4 * GIB * 0.85 - CPU_RUNTIME_BYTES and solo.fits(1)
    (pair,) = pair_options([small], [two], {}, memory)
    assert pair.usable_bytes == 2 * GIB * 0.85 - CPU_RUNTIME_BYTES and not pair.fits(1)  # 0.7 GiB each
    int8 = [cpu_curve(n, 10, 1, "int8") for n in ("s.large", "s.xlarge")]
    low, high = pair_options([small, big], int8, {}, memory)
    assert low.memory is not None and low.memory.load_bytes == 2.5 * GIB  # the fp32 weights twice
    assert not low.fits(1) and low.memory.max_batch(low.usable_bytes) == 0  # 2.5 GiB > 2.4 usable
    assert high.fits(1) and high.need_bytes(1) == 2.5 * GIB  # the load, not the 0.41 GiB it runs in
    # the candidate says its figure is the load's (the report names the float copy, not activations)
    assert high.memory_fields(1) == {"memory_bytes": int(2.5 * GIB), "memory_at_load": True}
    (steady,) = pair_options([big], [cpu_curve("s.xlarge", 10, 1)], {}, memory)
    assert steady.memory_fields(1)["memory_at_load"] is False


def test_a_row_says_what_its_curve_stands_on() -> None:
    """An AMX bf16 row extrapolated from fp32 read `proj` like every other row, and a request-mix row sized at the
    band's slow edge said nothing of it: the curve's caveats and its edge reach the candidate's notes."""
    from rightsize.plan.online import at_pessimistic_edge

    inst = instance("s.large", 0.17, vcpus=4, ram_gib=4)
    curve = replace(cpu_curve("s.large", 10, 1, "bf16"), provenance="projected", band_lo=0.7, band_hi=2.0,
                    extrapolated=True, caveats=("bf16 extrapolated from fp32 (AMX; not measured here)",))  # fmt: skip
    (opt,) = pair_options([inst], [curve], {}, {})
    assert opt.candidate().notes == ["bf16 extrapolated from fp32 (AMX; not measured here)"]
    edge = at_pessimistic_edge(opt).candidate()
    assert edge.notes[0].startswith("bf16 extrapolated")
    assert edge.notes[1] == ("sized at the pessimistic edge of the projection band (x2.00): latencies shown are at "
                             "that edge")  # fmt: skip
    (plain,) = pair_options([inst], [cpu_curve("s.large", 10, 1)], {}, {})
    assert plain.candidate().notes == []  # a measured curve: nothing to say
