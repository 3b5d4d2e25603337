"""An OpenAI-compatible ``/v1/embeddings`` endpoint backed by the static embedder.

A Letta server only knows how to embed through an HTTP API; pointing it at this
endpoint lets it rank archival memory semantically on a machine with no internet,
with exactly the vectors the ledger's own projections use.

With ``ARI_MEMORY_EMBED_KEY`` set, every route but ``/health`` wants ``Authorization: Bearer
<key>`` (Letta sends its OpenAI key so); ``--user`` drops root to that user once the model is
loaded and the port bound (``ari-ledger letta up`` run as root uses both).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hmac
import json
import os
import pwd
import signal
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ledger.errors import InvalidInput, LedgerError

if TYPE_CHECKING:  # (numpy and the model load when a server starts, not with the command line's parser)
    import numpy as np

    from projections.models.embedder import StaticEmbedder

# Big enough for a few thousand long passages per request, small enough that a
# confused client cannot make the server buffer gigabytes.
MAX_BODY_BYTES = 64 * 1024 * 1024
_ENCODINGS = ("float", "base64")


class _BadRequest(Exception):
    """A client error, answered as OpenAI's ``invalid_request_error``."""

    def __init__(self, field: str, reason: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(f"{field}: {reason}")
        self.status = status


class EmbeddingServer(ThreadingHTTPServer):
    """The HTTP server plus the embedder and logging choice its handlers need."""

    daemon_threads = True  # keep-alive connections must not block shutdown
    request_queue_size = 128  # the default backlog of 5 drops bursts of clients into 1 s SYN retries

    def __init__(
        self, address: tuple[str, int], embedder: StaticEmbedder, verbose: bool, api_key: str | None = None
    ) -> None:
        self.embedder = embedder
        self.verbose = verbose
        self.api_key = api_key
        super().__init__(address, _Handler)


def _parse_inputs(body: bytes, embedder: StaticEmbedder) -> tuple[list[str], str, str]:
    """Validate an embeddings request; returns (texts, model, encoding_format)."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _BadRequest("body", f"not valid JSON ({exc})") from None
    if not isinstance(request, dict):
        raise _BadRequest("body", "expected a JSON object")
    if "input" not in request:
        raise _BadRequest("input", "missing; expected a string or a list of strings")
    texts = request["input"]
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        raise _BadRequest("input", "expected a string or a non-empty list of strings")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise _BadRequest(
                f"input[{i}]",
                "only strings are supported (token ids belong to another model's tokenizer)",
            )
    model = request.get("model", embedder.name)
    if not isinstance(model, str):
        raise _BadRequest("model", "expected a string")
    encoding = request.get("encoding_format", "float")
    if encoding not in _ENCODINGS:
        raise _BadRequest("encoding_format", f"expected one of {list(_ENCODINGS)}, got {encoding!r}")
    dimensions = request.get("dimensions", embedder.dim)
    if dimensions != embedder.dim:
        raise _BadRequest("dimensions", f"this model only produces {embedder.dim} dimensions")
    return texts, model, encoding


def _encode_row(row: np.ndarray, encoding: str) -> list[float] | str:
    """One vector as OpenAI sends it: JSON floats, or base64 of little-endian float32."""
    if encoding == "base64":
        return base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
    return row.tolist()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: SDK clients reuse connections
    timeout = 60  # idle keep-alive connections release their thread
    disable_nagle_algorithm = True  # headers and body go out in two writes; no 40 ms ACK stall
    server: EmbeddingServer

    def do_GET(self) -> None:
        embedder = self.server.embedder
        path = urlsplit(self.path).path.rstrip("/")
        if path != "/health" and not self._authorized():
            return
        if path == "/health":
            self._send(HTTPStatus.OK, {"ok": True, "model": embedder.name, "dim": embedder.dim})
        elif path == "/v1/models":
            model = {"id": embedder.name, "object": "model", "created": 0, "owned_by": "ari-memory-ledger"}
            self._send(HTTPStatus.OK, {"object": "list", "data": [model]})
        else:
            self._send_error(HTTPStatus.NOT_FOUND, f"no route GET {path}")

    def do_POST(self) -> None:
        if not self._authorized():
            self._drain()
            return
        path = urlsplit(self.path).path.rstrip("/")
        if path != "/v1/embeddings":
            self._drain()
            self._send_error(HTTPStatus.NOT_FOUND, f"no route POST {path}")
            return
        embedder = self.server.embedder
        try:
            texts, model, encoding = _parse_inputs(self._read_body(), embedder)
        except _BadRequest as exc:
            self._send_error(exc.status, str(exc))
            return
        vectors, tokens = embedder.embed_with_usage(texts)
        data = [
            {"object": "embedding", "index": i, "embedding": _encode_row(row, encoding)}
            for i, row in enumerate(vectors)
        ]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._send(HTTPStatus.OK, {"object": "list", "data": data, "model": model, "usage": usage})

    def _authorized(self) -> bool:
        """True without a key or with its bearer header; otherwise answers 401."""
        key = self.server.api_key
        given = self.headers.get("Authorization", "")
        if not key or hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            return True
        self._send(HTTPStatus.UNAUTHORIZED, {"error": {"message": "a bearer key is required", "type": "auth_error"}})
        return False

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            raise _BadRequest("Content-Length", "header required", HTTPStatus.LENGTH_REQUIRED)
        if int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            raise _BadRequest("body", f"larger than {MAX_BODY_BYTES} bytes", HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        return self.rfile.read(int(length))

    def _drain(self) -> None:
        """Consume an unwanted body so the keep-alive connection stays in sync."""
        with contextlib.suppress(_BadRequest):
            self._read_body()

    def _send_error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": "invalid_request_error"}})

    def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if self.server.verbose:
            super().log_request(code, size)


def make_server(
    host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False, api_key: str | None = None
) -> EmbeddingServer:
    """Bind the endpoint (port 0 picks a free one) with the model already loaded."""
    from projections.models.embedder import get_embedder

    return EmbeddingServer((host, port), get_embedder(), verbose, api_key)


def _run_as(user: str, embedder: StaticEmbedder) -> None:
    """Drop root for ``user`` (name or uid) after loading the model: its files may lie where the user cannot go."""
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, ValueError):
        raise InvalidInput("--user", f"no such user {user!r}") from None
    if os.geteuid() != 0:
        raise InvalidInput("--user", "only root can switch users")
    if entry.pw_uid == 0:
        raise InvalidInput("--user", "must name an unprivileged user")
    embedder.embed_with_usage(["warm-up"])  # loads the model while its files are readable
    import traceback  # noqa: F401 - socketserver imports it on a request error, after the drop

    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)


class _Stop(BaseException):
    """Raised by the signal handler to leave ``serve_forever`` in the main thread.

    Raising (as SIGINT's KeyboardInterrupt does) avoids taking any lock inside a
    signal handler, which could deadlock against the interrupted main thread. Not an
    ``Exception``: ``socketserver`` catches those around ``process_request`` (a signal
    arriving while the main thread hands a connection to its thread) and serves on.
    """


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    parser.add_argument("--port", type=int, default=8284, help="0 picks a free port")
    parser.add_argument("--verbose", action="store_true", help="log one line per request on stderr")
    parser.add_argument("--user", default=None, help="(root) serve as this user once the model is loaded")


def serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; prints one ``listening on`` line once ready."""
    if not 0 <= args.port <= 65535:  # 0 picks a free one
        raise InvalidInput("--port", f"{args.port} is not a port (1–65535)")
    try:
        server = make_server(args.host, args.port, verbose=args.verbose, api_key=os.environ.get("ARI_MEMORY_EMBED_KEY"))
    except OSError as exc:
        raise LedgerError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    if args.user:
        try:
            _run_as(args.user, server.embedder)
        except BaseException:
            server.server_close()
            raise
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for sig in previous:
            signal.signal(sig, _raise_stop)
        print(f"listening on http://{args.host}:{server.server_port}/v1", flush=True)
        server.serve_forever()
    except _Stop:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.server_close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m projections.adapters.embed_server", description=__doc__)
    add_arguments(parser)
    try:
        return serve(parser.parse_args(argv))
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
