"""The OpenAI-compatible embeddings endpoint, over real HTTP."""

from __future__ import annotations

import base64
import http.client
import json
import select
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from projections.adapters.embed_server import make_server
from projections.models.embedder import get_embedder
from support.env import ROOT as REPO

TEXTS = [
    "RESULT SUMMARY metrics=[GFlops_per_s=15.82] loopline performance model",
    "BUILD FAILED: undefined reference to cublasDgemm_v2",
    "REFLECTION: use warmup before raising the learning rate",
]


def _serve(verbose: bool = False) -> Iterator[str]:
    server = make_server(verbose=verbose)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    yield from _serve()


def _request(url: str, payload: Any = None, *, raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else (None if payload is None else json.dumps(payload).encode())
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _vectors(body: dict) -> np.ndarray:
    rows = sorted(body["data"], key=lambda item: item["index"])
    decoded = [
        np.frombuffer(base64.b64decode(r["embedding"]), dtype="<f4")
        if isinstance(r["embedding"], str)
        else np.asarray(r["embedding"], dtype=np.float32)
        for r in rows
    ]
    return np.stack(decoded)


def test_single_string_float(base_url: str) -> None:
    status, body = _request(f"{base_url}/v1/embeddings", {"input": TEXTS[0], "model": "text-embedding-3-small"})
    assert status == 200
    assert body["object"] == "list" and body["model"] == "text-embedding-3-small"
    assert [(d["object"], d["index"]) for d in body["data"]] == [("embedding", 0)]
    assert isinstance(body["data"][0]["embedding"], list)
    np.testing.assert_array_equal(_vectors(body)[0], get_embedder().embed_one(TEXTS[0]))
    usage = body["usage"]
    assert usage["prompt_tokens"] == usage["total_tokens"] > 0


def test_list_input_base64_equals_float(base_url: str) -> None:
    expected = get_embedder().embed(TEXTS)
    _, as_floats = _request(f"{base_url}/v1/embeddings", {"input": TEXTS, "model": "m", "encoding_format": "float"})
    status, as_b64 = _request(f"{base_url}/v1/embeddings", {"input": TEXTS, "model": "m", "encoding_format": "base64"})
    assert status == 200
    assert all(isinstance(d["embedding"], str) for d in as_b64["data"])
    assert [d["index"] for d in as_b64["data"]] == [0, 1, 2]
    np.testing.assert_array_equal(_vectors(as_b64), expected)
    np.testing.assert_array_equal(_vectors(as_floats), expected)


def test_model_defaults_to_the_served_model(base_url: str) -> None:
    status, body = _request(f"{base_url}/v1/embeddings", {"input": ["only input"]})
    assert status == 200 and body["model"] == "wordllama/l2_supercat_256"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b"{not json", "body"),
        ({"model": "m"}, "input"),
        ({"input": [], "model": "m"}, "input"),
        ({"input": 42, "model": "m"}, "input"),
        ({"input": [[101, 2023, 102]], "model": "m"}, "input[0]"),
        ({"input": ["ok", 7], "model": "m"}, "input[1]"),
        ({"input": "x", "model": 5}, "model"),
        ({"input": "x", "encoding_format": "hex"}, "encoding_format"),
        ({"input": "x", "dimensions": 64}, "dimensions"),
    ],
)
def test_bad_requests_name_the_field(base_url: str, payload: Any, field: str) -> None:
    raw = payload if isinstance(payload, bytes) else None
    status, body = _request(f"{base_url}/v1/embeddings", payload if raw is None else None, raw=raw)
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith(f"{field}:")


def test_health_models_and_unknown_route(base_url: str) -> None:
    assert _request(f"{base_url}/health") == (200, {"ok": True, "model": "wordllama/l2_supercat_256", "dim": 256})
    status, models = _request(f"{base_url}/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == ["wordllama/l2_supercat_256"]
    status, missing = _request(f"{base_url}/v1/chat/completions", {"messages": []})
    assert status == 404 and missing["error"]["type"] == "invalid_request_error"


def test_keep_alive_connection_serves_several_requests(base_url: str) -> None:
    host, port = base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for text in TEXTS:
            connection.request(
                "POST", "/v1/embeddings", body=json.dumps({"input": text}), headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            assert response.status == 200
            np.testing.assert_array_equal(_vectors(json.loads(response.read()))[0], get_embedder().embed_one(text))
    finally:
        connection.close()


def test_concurrent_requests(base_url: str) -> None:
    expected = get_embedder().embed(TEXTS)
    failures: list[str] = []

    def client(i: int) -> None:
        for _ in range(5):
            status, body = _request(f"{base_url}/v1/embeddings", {"input": TEXTS, "encoding_format": "base64"})
            if status != 200 or not np.array_equal(_vectors(body), expected):
                failures.append(f"client {i}: {status}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_access_log_only_when_verbose(capfd: pytest.CaptureFixture[str]) -> None:
    for verbose in (False, True):
        serving = _serve(verbose=verbose)
        url = next(serving)
        _request(f"{url}/health")
        serving.close()
        logged = capfd.readouterr().err
        assert ("GET /health" in logged) is verbose, logged


def test_subprocess_serves_and_exits_cleanly_on_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "projections.adapters.embed_server", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "server never printed its listening line"
        line = process.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:") and line.endswith("/v1\n"), line
        api = line.removeprefix("listening on ").strip()
        status, body = _request(f"{api}/embeddings", {"input": TEXTS, "encoding_format": "base64"})
        assert status == 200
        np.testing.assert_array_equal(_vectors(body), get_embedder().embed(TEXTS))
        assert _request(api.removesuffix("/v1") + "/health")[1]["ok"] is True
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out == "" and err == ""
