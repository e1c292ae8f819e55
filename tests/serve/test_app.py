"""A real server on 127.0.0.1: batching, bodies, auth, deadlines, cancellation, drain, routing."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serve_helpers import SlowModel, burst, metric

from rightsize.serve import PoolConfig, ServerConfig, running_server
from rightsize.wire import encode_tensor

SAMPLE = [0.25] * 100  # tiny simplenet: 100 features


def test_predict_json_and_binary_agree(simplenet_url: str) -> None:
    x = np.random.default_rng(0).standard_normal((3, 100)).astype(np.float32)
    r = httpx.post(f"{simplenet_url}/v1/predict", json={"inputs": x.tolist()})
    assert r.status_code == 200 and r.headers["x-pool"] == "cpu"
    out = np.array(r.json()["outputs"], dtype=np.float32)
    assert out.shape == (3, 2)
    rb = httpx.post(
        f"{simplenet_url}/v1/predict",
        content=encode_tensor(x),
        headers={"content-type": "application/octet-stream", "accept": "application/octet-stream"},
    )
    assert rb.status_code == 200 and rb.headers["content-type"] == "application/octet-stream"
    from rightsize.wire import decode_tensor

    np.testing.assert_allclose(decode_tensor(rb.content), out, rtol=1e-5, atol=1e-6)


def test_batches_form_under_concurrent_load(simplenet_url: str) -> None:
    before = httpx.get(f"{simplenet_url}/metrics").text

    responses = asyncio.run(burst(simplenet_url, 48, {"inputs": [SAMPLE]}))
    assert [r.status_code for r in responses] == [200] * 48
    after = httpx.get(f"{simplenet_url}/metrics").text
    batches = metric(after, "rightsize_batch_size_count") - metric(before, "rightsize_batch_size_count")
    samples = metric(after, "rightsize_batch_size_sum") - metric(before, "rightsize_batch_size_sum")
    assert samples == 48 and samples / batches > 1.0  # mean batch size above 1: batches formed
    assert max(int(r.headers["x-batch-size"]) for r in responses) > 1


def test_batch_log_lists_each_batch_once_with_its_times(simplenet_url: str) -> None:
    start = httpx.get(f"{simplenet_url}/v1/batches", params={"since": 10**9}).json()
    assert start["batches"] == [] and start["fields"] == ["pool", "samples", "compute_ms", "busy_ms", "taken_ms"]
    responses = asyncio.run(burst(simplenet_url, 24, {"inputs": [SAMPLE]}))
    assert [r.status_code for r in responses] == [200] * 24
    log = httpx.get(f"{simplenet_url}/v1/batches", params={"since": start["next"]}).json()
    rows = log["batches"]
    assert log["first"] == start["next"] and log["next"] == start["next"] + len(rows)
    assert sum(r[1] for r in rows) == 24  # every sample in exactly one logged batch
    # Worker-busy time covers the model call plus the hops around it.
    assert all(r[2] > 0 and r[3] >= r[2] for r in rows), rows
    # When each batch was taken off the queue (ms on the server's perf_counter): logged as they end, so
    # each one ended (taken + busy) no later than the next logged one.
    ends = [r[4] + r[3] for r in rows]
    assert all(a <= b + 0.01 for a, b in itertools.pairwise(ends)) and ends[-1] - rows[0][4] < 60_000, rows
    again = httpx.get(f"{simplenet_url}/v1/batches", params={"since": log["next"]}).json()
    assert again["batches"] == [] and again["next"] == log["next"]
    bad = httpx.get(f"{simplenet_url}/v1/batches", params={"since": -1})
    assert bad.status_code == 422 and "since" in bad.json()["detail"]
    word = httpx.get(f"{simplenet_url}/v1/batches", params={"since": "abc"})  # was pydantic's error list
    assert word.status_code == 422 and word.json()["detail"] == (
        "since: must be a whole number >= 0 (the 'next' of a previous reply), got 'abc'")  # fmt: skip
    past = httpx.get(f"{simplenet_url}/v1/batches", params={"since": 2**63})  # islice's ValueError: a 500
    assert past.status_code == 200 and past.json()["batches"] == [] and past.json()["first"] == past.json()["next"]


def test_health_ready_info_metrics_openapi(simplenet_url: str) -> None:
    assert httpx.get(f"{simplenet_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{simplenet_url}/readyz").status_code == 200
    for probe in ("/healthz", "/readyz"):  # a load balancer's HEAD check had been answered 405
        head = httpx.head(f"{simplenet_url}{probe}")
        assert head.status_code == 200 and head.content == b"", probe
    info = httpx.get(f"{simplenet_url}/v1/info").json()
    assert info["sample_shape"] == [100] and info["dtype"] == "float32" and info["max_batch"] == 8
    text = httpx.get(f"{simplenet_url}/metrics").text
    for name in ("rightsize_queue_length", "rightsize_queue_seconds_bucket", "rightsize_batch_wait_seconds_sum",
                 "rightsize_compute_seconds_count", "rightsize_dispatch_total", "rightsize_routed_total",
                 "rightsize_pool_utilization", "rightsize_cpu_utilization"):  # fmt: skip
        assert name in text, name
    body = httpx.get(f"{simplenet_url}/openapi.json").json()["paths"]["/v1/predict"]["post"]["requestBody"]
    assert set(body["content"]) == {"application/json", "application/octet-stream"}


def test_size_and_type_limits(simplenet_url: str) -> None:
    url = f"{simplenet_url}/v1/predict"
    assert httpx.post(url, content=b"x" * 70000, headers={"content-type": "application/json"}).status_code == 413
    assert httpx.post(url, json={"inputs": [SAMPLE] * 9}).status_code == 413  # more than max_batch samples
    assert httpx.post(url, content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
    assert httpx.post(url, json={"inputs": [SAMPLE[:-1]]}).status_code == 422
    assert httpx.get(url).status_code == 405


def test_405s_on_predict_are_counted_with_its_other_answers(simplenet_url: str) -> None:
    """FastAPI's router had answered them before anything counted: /metrics said "every /v1/predict answer" and
    left them out."""

    def answered_405() -> float:
        text = httpx.get(f"{simplenet_url}/metrics").text
        return metric("\n".join(x for x in text.splitlines() if 'code="405"' in x), "rightsize_responses_total")

    before = answered_405()
    for method in ("GET", "PUT", "HEAD", "OPTIONS"):
        r = httpx.request(method, f"{simplenet_url}/v1/predict")
        assert (r.status_code, r.headers["allow"]) == (405, "POST"), method
        if method != "HEAD":
            assert r.json() == {"detail": f"{method} is not allowed on /v1/predict; use POST"}
    assert answered_405() - before == 4


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as c:  # one client: building one per request costs ~50 ms here
        yield c


bodies = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda d: __import__("json").dumps(d).encode(), st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
        lambda c: st.lists(c, max_size=5) | st.dictionaries(st.sampled_from(["inputs", "priority", "deadline_ms"]), c),
        max_leaves=30,
    )),
    st.builds(lambda n, k, v: __import__("json").dumps({"inputs": [[v] * k] * n}).encode(),
              st.integers(0, 10), st.integers(0, 120), st.floats(-10, 10)),
)  # fmt: skip


@pytest.mark.slow  # ~3 s on 2 cores: kept out of make test-fast
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies, ctype=st.sampled_from(["application/json", "application/octet-stream", "text/csv"]))
def test_fuzzed_bodies_get_4xx_never_5xx(simplenet_url: str, client: httpx.Client, body: bytes, ctype: str) -> None:
    r = client.post(f"{simplenet_url}/v1/predict", content=body, headers={"content-type": ctype})
    assert r.status_code == 200 or 400 <= r.status_code < 500, (r.status_code, r.text)


def test_token_enforced_when_set() -> None:
    with running_server(ServerConfig(model="simplenet", tiny=True, port=0, token="s3cret", warmup=False)) as url:
        body = {"inputs": [SAMPLE]}
        assert httpx.post(f"{url}/v1/predict", json=body).status_code == 401
        r = httpx.post(f"{url}/v1/predict", json=body, headers={"authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert httpx.post(f"{url}/v1/predict", json=body, headers={"authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.get(f"{url}/metrics").status_code == 401
        assert httpx.get(f"{url}/healthz").status_code == 200  # probes stay open


def start_blocker(url: str, model: SlowModel) -> threading.Thread:
    """A request that occupies the only worker (value 1 in the first column); returns once it runs."""
    t = threading.Thread(target=httpx.post, args=(f"{url}/v1/predict",), kwargs={"json": {"inputs": [[1, 0]]}})
    t.start()
    deadline = time.monotonic() + 10
    while not model.seen and time.monotonic() < deadline:
        time.sleep(0.005)
    return t


def slow_config(model: SlowModel, **kw: object) -> ServerConfig:
    base: dict[str, object] = {"port": 0, "predict": model, "sample_shape": (2,), "workers": 1, "threads": 1,
                               "max_batch": 1, "max_wait_ms": 0.0, "warmup": False}  # fmt: skip
    return ServerConfig(**(base | kw))  # type: ignore[arg-type]


def test_deadline_gives_504_without_running() -> None:
    model = SlowModel(0.3)
    with running_server(slow_config(model)) as url:
        blocker = start_blocker(url, model)
        r = httpx.post(f"{url}/v1/predict", json={"inputs": [[7, 0]], "deadline_ms": 50})
        assert r.status_code == 504
        blocker.join()
        assert 7.0 not in model.seen


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_client_gone_is_dropped_before_running() -> None:
    model = SlowModel(0.4)
    with running_server(slow_config(model)) as url:
        blocker = start_blocker(url, model)
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}/v1/predict", json={"inputs": [[5, 0]]}, timeout=0.1)
        blocker.join()
        assert httpx.post(f"{url}/v1/predict", json={"inputs": [[6, 0]]}).status_code == 200
        assert model.seen == [1.0, 6.0]  # the abandoned request never ran


def test_shutdown_drains_every_queued_request() -> None:
    model = SlowModel(0.1)
    results: list[int] = []
    config = slow_config(model, max_batch=4, max_wait_ms=10_000.0)  # only "full" or "drain" can dispatch

    def call(url: str, v: float) -> None:
        results.append(httpx.post(f"{url}/v1/predict", json={"inputs": [[v, 1]]}, timeout=10).status_code)

    t0 = time.monotonic()
    with running_server(config) as url:
        threads = [threading.Thread(target=call, args=(url, float(i))) for i in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while metric(httpx.get(f"{url}/metrics").text, "rightsize_queue_length") < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert results == []  # a partial batch of 3 waits for its 10 s window
        t0 = time.monotonic()
    for t in threads:
        t.join()
    assert results == [200, 200, 200] and sorted(model.seen) == [0.0, 1.0, 2.0]
    assert time.monotonic() - t0 < 3.0  # drained at once, not after the window


@pytest.mark.slow  # > 1.6 s: make test runs it, make test-fast skips it
def test_hybrid_spills_from_a_backed_up_pool() -> None:
    small, large = SlowModel(0.0, 0.004), SlowModel(0.01, 0.0005)  # t = 4n ms vs 10 + 0.5n ms: crossover ~2.9
    pools = (PoolConfig("small", predict=small, threads=1), PoolConfig("large", predict=large, threads=1))
    config = ServerConfig(
        port=0, pools=pools, sample_shape=(2,), router="hybrid", max_batch=8, max_wait_ms=1.0, max_queue_batches=0
    )  # routing under a burst, not admission: everything is accepted
    with running_server(config) as url:
        responses = asyncio.run(burst(url, 120, {"inputs": [[1, 1]]}))
        assert all(r.status_code == 200 for r in responses)
        text = httpx.get(f"{url}/metrics").text
        assert metric(text, 'rightsize_routed_total{pool="small",reason="home"}') > 0
        assert metric(text, 'rightsize_routed_total{pool="large",reason="spill"}') > 0
        big = httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 1]] * 8})
        assert big.headers["x-pool"] == "large"  # 8 samples: 32 ms on small vs 14 ms on large


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_full_queue_answers_503_with_retry_after() -> None:
    model = SlowModel(1.0)  # long enough for the polling below on a busy machine
    with running_server(slow_config(model, queue_size=1)) as url:
        blocker = start_blocker(url, model)  # running
        deadline = time.monotonic() + 10
        queued = threading.Thread(target=httpx.post, args=(f"{url}/v1/predict",), kwargs={"json": {"inputs": [[2, 0]]}})
        queued.start()  # fills the one-sample queue
        while metric(httpx.get(f"{url}/metrics").text, "rightsize_queue_length") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        r = httpx.post(f"{url}/v1/predict", json={"inputs": [[3, 0]]})
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
        blocker.join()
        queued.join()
        assert model.seen == [1.0, 2.0]
