"""Serve a model behind a micro-batching HTTP server (``rightsize serve``).

    from rightsize.serve import ServerConfig, running_server
    with running_server(ServerConfig(model="simplenet", tiny=True, port=0)) as base_url:
        ...  # POST {base_url}/v1/predict

Modules: ``config`` (ServerConfig, PoolConfig), ``codec`` (bodies), ``batcher`` (queue + workers),
``router`` (pool choice, online t(n) fit), ``workers`` (model -> run(batch)), ``metrics`` (Prometheus),
``service`` (pools + router on the loop), ``endpoint`` (POST /v1/predict, raw ASGI), ``app`` (FastAPI),
``server`` (uvicorn, in-process), ``process`` (the CLI server in a child process).
``ServerConfig`` imports nothing heavy; the server parts load fastapi/uvicorn when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rightsize.serve.config import PoolConfig, ServerConfig

if TYPE_CHECKING:
    from rightsize.serve.app import create_app
    from rightsize.serve.server import running_server, serve

__all__ = ["PoolConfig", "ServerConfig", "create_app", "running_server", "serve"]

_LAZY = {
    "create_app": "rightsize.serve.app",
    "running_server": "rightsize.serve.server",
    "serve": "rightsize.serve.server",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rightsize.serve' has no attribute {name!r}")
