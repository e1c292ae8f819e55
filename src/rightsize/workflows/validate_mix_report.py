"""The text of a request-mix validation (``rightsize.workflows.validate_mix``): the SLO judged per level and size
class, and the report's table."""

from __future__ import annotations

from typing import Any

from rightsize.loadgen.validation import error_pct
from rightsize.workflows.validate_run import BUSY_EFFECT

__all__ = ["mix_slo_verdict", "render_mix_report"]

OVERLOADED = 0.95  # a lane busier than this over a level is past saturation: its queue grows until the end


def _err(pred: dict[str, float] | None, meas: dict[str, Any] | None, key: str) -> float | None:
    """(measured - predicted) / predicted in percent, as single-size validate's (positive: slower than predicted);
    it had been (predicted - measured) / measured, a measurement above the prediction printed negative."""
    if pred is None or not meas or meas.get(key) is None or not pred.get(key):
        return None
    return error_pct(float(meas[key]), pred[key])


def mix_slo_verdict(points: list[dict[str, Any]], percentile: float, bound_ms: float, headroom: float) -> str | None:
    """The spec's SLO judged per level on every size class as measured here ("met at 50%, missed at 80% by the
    8-sample class: p95 412.0 ms"), or None when no level measured that percentile. A class whose run was invalid or
    dropped requests counts as a miss: its percentile is not the server's."""
    named = {50.0: "p50", 90.0: "p90", 95.0: "p95", 99.0: "p99", 99.9: "p99_9", 100.0: "max"}  # Latency.to_dict

    def at(d: dict[str, Any] | None) -> float | None:
        got = None if not d else d.get(named.get(percentile, ""), (d.get("others") or {}).get(str(percentile)))
        return None if got is None else float(got)

    words = []
    for p in points:
        worst: tuple[float, int] | None = None
        broken = []
        busy = next((n for c in p["classes"] for n in c.get("problems", []) if n.endswith(BUSY_EFFECT)), None)
        if busy is not None:  # neither met nor missed by the plan: this machine's load
            words.append(f"not judged at {p['label']}: {busy.removesuffix(': ' + BUSY_EFFECT)}")
            continue
        for c in p["classes"]:
            got = at(c.get("measured_ms"))
            if not c["valid"] or c["error_fraction"] > 0:
                broken.append(c["samples"])
            elif got is not None and (worst is None or got > worst[0]):
                worst = (got, c["samples"])
        if worst is None and not broken:
            continue
        if broken:
            words.append(f"missed at {p['label']}: the {', '.join(map(str, broken))}-sample run was invalid or "
                         "dropped requests")  # fmt: skip
        elif worst is not None and worst[0] > bound_ms:
            words.append(f"missed at {p['label']} by the {worst[1]}-sample class: p{percentile:g} {worst[0]:.1f} ms")
        elif worst is not None:
            words.append(f"met at {p['label']} (slowest: {worst[1]}-sample class, p{percentile:g} {worst[0]:.1f} ms)")
    if not words:
        return None
    return (f"SLO p{percentile:g} <= {bound_ms:g} ms for every size class here: {'; '.join(words)}. Levels are "
            f"fractions of this machine's capacity; the plan runs each pool at most {headroom:.0%} busy (headroom), "
            "and these lanes stand in for its instances, whose own speed the projection sets")  # fmt: skip


def _planned_words(p: dict[str, Any]) -> str:
    """A lane's planned pool in words: "4 replicas on 1 x c7i.2xlarge", or "2 x g5.xlarge" (one replica each)."""
    from rightsize.plan.fleet import replicas_on

    return replicas_on(p.get("replicas"), p.get("count"), p.get("instance"))


def render_mix_report(report: dict[str, Any]) -> str:
    """The mix validation as text: the layout, then one row per level and size class."""
    mix = ", ".join(f"{m['share']:.0%} x {m['samples']}" for m in report["mix"])
    lanes = "; ".join(
        f"{lane['name']} (sizes {','.join(map(str, lane['sizes']))}): 1x{lane['threads']} {lane['precision']}"
        + (f", plan: {_planned_words(lane['planned'])}" if lane.get("planned") else "")
        for lane in report["lanes"]
    )
    how = f"size split at {report['crossover_samples']} samples" if report["layout"] == "split" else "one pool"
    lines = [
        f"validate {report['name']} ({report['model']}), request mix {mix}: serving the {how} "
        f"(plan chose {report['fleet_choice']}); lanes {lanes}",
        f"max_batch {report['max_batch']}, max_wait {report['max_wait_ms']:g} ms; {report['arrival']} arrivals per "
        f"class; busier lane full at {report['capacity_per_s']:.1f} req/s; serving overhead "
        f"per request by class (light-load probe): "
        + ", ".join(f"{k}-sample {v:.1f} ms" for k, v in report["overhead_ms"].items()),
        f"{'level':>5} {'class':>6} {'lane':>5} {'rate/s':>7} {'sent':>5} {'meas p50':>9} {'pred p50':>9} {'err':>6} "
        f"{'meas p95':>9} {'pred p95':>9} {'err':>6} {'p95 range':>13} {'forecast p95':>12}",
    ]
    for p in report["points"]:
        for c in p["classes"]:
            meas, pred, fc = c["measured_ms"], c["predicted_served_ms"], c["predicted_ms"]

            def ms(d: dict[str, Any] | None, k: str) -> str:
                return "-" if not d or d.get(k) is None else f"{float(d[k]):.1f}"

            def span(d: dict[str, Any] | None) -> str:
                return "-" if not d or not d.get("p95_range") else "{:.0f}-{:.0f}".format(*d["p95_range"])

            def pct(e: float | None) -> str:
                return "-" if e is None else f"{e:+.0f}%"

            why = ([f"{c['error_fraction']:.1%} of requests failed"] if c["error_fraction"] else []) + c["problems"]
            flag = "" if c["valid"] and c["error_fraction"] == 0 else "  not comparable: " + "; ".join(why)
            lines.append(
                f"{p['label']:>5} {c['samples']:>6} {c['lane']:>5} {c['rate_per_s']:>7.1f} {c['sent'] or 0:>5} "
                f"{ms(meas, 'p50'):>9} {ms(pred, 'p50'):>9} {pct(_err(pred, meas, 'p50')):>6} "
                f"{ms(meas, 'p95'):>9} {ms(pred, 'p95'):>9} {pct(_err(pred, meas, 'p95')):>6} {span(pred):>13} "
                f"{ms(fc, 'p95'):>12}" + flag
            )
        for lane in p["lanes"]:
            if lane["batches"]:
                busy = lane.get("busy_fraction")
                over = busy is not None and busy > OVERLOADED
                lines.append(
                    f"      lane {lane['lane']}: {lane['batches']} batches, mean {lane['mean_samples']:.1f} samples, "
                    f"{lane['served_batch_ms']:.1f} ms served vs {lane['curve_batch_ms']:.1f} ms on the curve"
                    + ("" if busy is None else f", {busy:.0%} busy")
                    + (": an overload, its p95 grows with the run's length (a lower --loads level is the check)"
                       if over else "")
                )  # fmt: skip
    e = report.get("served_error_pct")
    if e:
        lines.append(
            f"pred = the simulator given the server's own batch times: |error| median {e['median']:.0f}%, worst "
            f"{e['worst']:.0f}% over {e['n']} class percentiles; measured p95 inside the simulator's 5-95% range "
            f"over service-time draws: {e['p95_in_range']}/{e['classes']}; forecast = the profile's curve"
        )
    if report.get("slo_verdict"):
        lines.append(report["slo_verdict"])
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)
