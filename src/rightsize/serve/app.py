"""The HTTP face: ``create_app(config) -> FastAPI`` with /v1/predict, /v1/info, /healthz, /readyz, /metrics.

    POST /v1/predict   JSON {"inputs": [...], "priority": 0, "deadline_ms": null} or a binary tensor body
                       (see rightsize.wire) -> {"outputs": [...]} (or binary with Accept: octet-stream)
                       400 malformed | 401 token | 413 too large | 415 content type | 422 shape/dtype/value
                       503 queue full or would miss the SLO (Retry-After) | 504 deadline passed before running
    GET  /v1/info      model, sample shape, dtype, max batch, pools (what a load generator needs)
    GET  /healthz      200 while the process serves; /readyz 200 once warmed up and not draining (HEAD too)
    GET  /metrics      Prometheus text
    GET  /v1/batches   the last batches one by one, ``?since=N`` (JSON; ``metrics.BatchLog``): pool, samples,
                       model ms, worker-busy ms, so a client can replay the service times the server had;
                       and ``cpu_s``, the CPU seconds so far of the server process and its worker processes

POST /v1/predict is answered by ``endpoint.PredictEndpoint`` below FastAPI's routing (it is the hot
path; no pydantic model per request); the FastAPI route of the same path documents both body
formats in the OpenAPI schema.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from rightsize import __version__
from rightsize.serve.config import ServerConfig
from rightsize.serve.endpoint import JSON_TYPE, PATH, FastPath, PredictEndpoint, error_reply, since_number
from rightsize.serve.service import Service
from rightsize.wire import BINARY_TYPE, dumps

_PREDICT_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            JSON_TYPE: {
                "schema": {
                    "type": "object",
                    "required": ["inputs"],
                    "properties": {
                        "inputs": {"type": "array", "description": "One or more samples, each of the model's "
                                   "sample shape (GET /v1/info).", "items": {}},
                        "priority": {"type": "integer", "default": 0, "description": "Higher runs first."},
                        "deadline_ms": {"type": ["number", "null"], "default": None,
                                        "description": "504 if the request has not started within this many ms."},
                    },
                }
            },
            BINARY_TYPE: {
                "schema": {"type": "string", "format": "binary", "description": "RSZT tensor: b'RSZT', version u8, "
                           "dtype u8, ndim u8, 0 u8, shape u32×ndim, little-endian data. Headers X-Priority, "
                           "X-Deadline-Ms."}
            },
        },
    },
    "responses": {
        "200": {"description": "Outputs, one row per input sample.",
                "content": {JSON_TYPE: {"schema": {"type": "object", "properties": {"outputs": {"type": "array"}}}},
                            BINARY_TYPE: {"schema": {"type": "string", "format": "binary"}}}},
        "400": {"description": "Malformed body."},
        "401": {"description": "Missing or wrong bearer token."},
        "413": {"description": "Body or sample count too large."},
        "415": {"description": "Unsupported content type."},
        "422": {"description": "Wrong shape, dtype or value."},
        "503": {"description": "Queue full, would miss the SLO, or shutting down; see Retry-After."},
        "504": {"description": "Deadline passed before the request ran."},
    },
}  # fmt: skip


def create_app(config: ServerConfig, service: Service | None = None) -> FastAPI:
    """The FastAPI app of one server; the model loads when the app starts (lifespan)."""
    svc = service or Service(config)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await svc.start()
        try:
            yield
        finally:
            await svc.stop()

    app = FastAPI(
        title="rightsize serve",
        version=__version__,
        description=f"Micro-batching inference server for {config.model!r}.",
        lifespan=lifespan,
    )
    app.state.service = svc

    endpoint = PredictEndpoint(svc, config.token, config.max_body_bytes)
    app.add_middleware(FastPath, endpoint=endpoint)  # POST /v1/predict skips FastAPI's routing

    @app.post(PATH, response_class=Response, openapi_extra=_PREDICT_DOC, summary="Run the model")
    async def predict(request: Request) -> Response:  # documents the path; FastPath answers it first
        status, headers, body = await endpoint.reply(request.scope, request.receive)
        return Response(body, status, {k.decode(): v.decode() for k, v in headers})

    @app.get("/v1/info", summary="Model and server settings")
    async def info() -> Response:
        return Response(dumps(svc.info()), media_type=JSON_TYPE)

    @app.get("/healthz", summary="Liveness")
    @app.head("/healthz", include_in_schema=False)  # a load balancer's check (405 before)
    async def healthz() -> Response:
        return Response(dumps({"status": "ok"}), media_type=JSON_TYPE)

    @app.get("/readyz", summary="Readiness: warmed up and not draining")
    @app.head("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        ok = svc.ready and not svc.draining
        return Response(dumps({"ready": ok}), 200 if ok else 503, media_type=JSON_TYPE)

    def refused(request: Request) -> Response | None:
        if endpoint.authorized(request.headers.get("authorization", "").encode("latin-1")):
            return None
        status, headers, body = error_reply(401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])
        return Response(body, status, {k.decode(): v.decode() for k, v in headers})

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics(request: Request) -> Response:
        return refused(request) or Response(svc.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/batches", summary="The last batches one by one (pool, samples, model ms, worker-busy ms)")
    async def batches(request: Request, since: str = "0") -> Response:
        if (denied := refused(request)) is not None:
            return denied
        if isinstance(start := since_number(since), str):
            status, headers, body = error_reply(422, start)
            return Response(body, status, {k.decode(): v.decode() for k, v in headers})
        # The CPU seconds of the server process and its worker processes beside the log: over a level, CPU not spent
        # in the model is the serving path's own (HTTP, JSON, hand-offs), which shares the model's cores.
        log = svc.metrics.batch_log.since(start) | {"cpu_s": svc.metrics.cpu_s()}
        return Response(dumps(log), media_type=JSON_TYPE)

    return app
