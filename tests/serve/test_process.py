"""The CLI end to end: ``rightsize serve`` in a child process, ready JSON, a prediction, SIGINT drains."""

from __future__ import annotations

import httpx
import pytest

from rightsize.errors import RunFailedError
from rightsize.serve import ServerConfig
from rightsize.serve.process import running_server_process


@pytest.mark.slow
def test_cli_server_in_a_child_process() -> None:
    config = ServerConfig(model="distilbert", tiny=True, seq_len=8, port=0, max_batch=4, token="tok")
    with running_server_process(config) as url:
        info = httpx.get(f"{url}/v1/info").json()
        assert info["sample_shape"] == [8] and info["dtype"] == "int64" and info["max_value"] == 1000
        auth = {"authorization": "Bearer tok"}
        r = httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2, 3, 4, 5, 6, 7, 8]] * 2}, headers=auth)
        assert r.status_code == 200 and len(r.json()["outputs"]) == 2
        bad = httpx.post(f"{url}/v1/predict", json={"inputs": [[1000] * 8]}, headers=auth)  # id >= vocab
        assert bad.status_code == 422


def test_bad_model_fails_fast_with_the_cli_message() -> None:
    with pytest.raises(RunFailedError, match="not in the zoo"), running_server_process(ServerConfig(model="nosuch")):
        pass
