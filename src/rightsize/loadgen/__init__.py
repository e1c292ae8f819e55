"""Load generation: coordinated-omission-free open loop, closed loop, knee search. Never imports the server.

from rightsize.loadgen import OpenLoopConfig, Target, run_open_loop
result = run_open_loop(Target.from_url("http://127.0.0.1:8000"), OpenLoopConfig(rate_per_s=200, duration_s=5))
print(result.render())
"""

from rightsize.loadgen.closedloop import ClosedLoopConfig, closed_loop
from rightsize.loadgen.knee import KneeResult, KneeStep, find_knee, meets_slo
from rightsize.loadgen.openloop import OpenLoopConfig, open_loop
from rightsize.loadgen.result import ERROR_KINDS, LoadResult, error_kind
from rightsize.loadgen.run import event_loop_name, find_knee_open_loop, run_closed_loop, run_open_loop
from rightsize.loadgen.schedule import Arrival, arrival_offsets_s
from rightsize.loadgen.target import (
    DEFAULT_PATH,
    ENCODINGS,
    Target,
    body_for_server,
    default_body,
    parse_header,
    payload_for_server,
    server_info,
)

__all__ = [
    "DEFAULT_PATH",
    "ENCODINGS",
    "ERROR_KINDS",
    "Arrival",
    "ClosedLoopConfig",
    "KneeResult",
    "KneeStep",
    "LoadResult",
    "OpenLoopConfig",
    "Target",
    "arrival_offsets_s",
    "body_for_server",
    "closed_loop",
    "default_body",
    "error_kind",
    "event_loop_name",
    "find_knee",
    "find_knee_open_loop",
    "meets_slo",
    "open_loop",
    "parse_header",
    "payload_for_server",
    "run_closed_loop",
    "run_open_loop",
    "server_info",
]
