"""A tiny OpenAI-compatible HTTP server for tests (stdlib only, 127.0.0.1, a free port).

    with serve([answer1, answer2]) as stub:
        client = OpenAI(base_url=stub.base_url, api_key="test")
        ...
        stub.requests  # the JSON bodies received, in order

Each answer is used for one POST /v1/chat/completions, in order (the last one
repeats). An answer is a string (the assistant message content), a dict (a
whole response body, sent as is), a callable `(request_body) -> str | dict`,
or an `Error(status, message)`. GET /v1/models lists one model. Reusable by
any test that needs a model endpoint (the distiller's drafts, the agent).
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union


@dataclass
class Error:
    status: int
    message: str = "stub error"


Answer = Union[str, dict, Callable[[dict], Union[str, dict]], Error]


@dataclass
class Stub:
    answers: list[Answer]
    model: str = "stub-model"
    requests: list[dict] = field(default_factory=list)
    base_url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self, body: dict) -> Answer:
        with self._lock:
            self.requests.append(body)
            i = min(len(self.requests) - 1, len(self.answers) - 1)
            answer = self.answers[i]
        return answer(body) if callable(answer) and not isinstance(answer, Error) else answer


def completion(content: str, model: str = "stub-model", finish_reason: str = "stop") -> dict:
    return {
        "id": f"chatcmpl-stub-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: dict) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": stub.model, "object": "model", "owned_by": "stub"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(400, {"error": {"message": "invalid JSON body"}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            answer = stub.next_answer(body)
            if isinstance(answer, Error):
                self._send(answer.status, {"error": {"message": answer.message, "type": "stub"}})
            elif isinstance(answer, dict):
                self._send(200, answer)
            else:
                self._send(200, completion(str(answer), body.get("model", stub.model)))

    return Handler


@contextmanager
def serve(answers: list[Answer], model: str = "stub-model") -> Iterator[Stub]:
    if not answers:
        raise ValueError("serve() needs at least one answer")
    stub = Stub(list(answers), model)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    stub.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
