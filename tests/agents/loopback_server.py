"""A real OpenAI-compatible HTTP server on 127.0.0.1 that replays recorded answers.

The LLM agent's tests talk to this server through the real `openai` client over real sockets; nothing
is patched. A recording is a JSON list of answers served in order (the last repeats). Each answer is
one of:

    {"content": "...", "usage": {...}}     a normal chat completion (usage optional, may be hostile)
    {"content_repeat": ["prefix", "unit", N]}   content = prefix + unit * N (oversized answers)
    {"echo_auth": "template with {auth}"}  content quoting the request's Authorization header (hostile)
    {"raw": "...", "status": 200}          this exact body with Content-Type: application/json (malformed)
    {"status": 500, "body": "..."}         an HTTP error
    {"choices": <anything>}                a completion whose choices are what is given
    {"hang_up": true}                      close the connection without answering

Every request is kept (path, headers without Authorization, JSON body) so tests can assert on what
the agent sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).parent / "recordings"


def load_recording(name: str) -> list[dict[str, Any]]:
    return list(json.loads((RECORDINGS / f"{name}.json").read_text())["answers"])


class LoopbackServer:
    def __init__(self, answers: Sequence[dict[str, Any]]):
        if not answers:
            raise ValueError("a recording needs at least one answer")
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self._lock = threading.Lock()
        self._served = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                auth = self.headers.get("Authorization", "")
                with server._lock:
                    answer = server.answers[min(server._served, len(server.answers) - 1)]
                    server._served += 1
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
                    server.requests.append({"path": self.path, "headers": headers, "body": json.loads(body)})
                    server.auth_headers.append(auth)
                server._answer(self, answer, auth, json.loads(body))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def served(self) -> int:
        return self._served

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, answer: dict[str, Any], auth: str,
                request: dict[str, Any]) -> None:
        if answer.get("hang_up"):
            handler.close_connection = True
            handler.wfile.flush()
            handler.connection.close()
            return
        status = int(answer.get("status", 200))
        if "raw" in answer:
            self._send(handler, status, answer["raw"].encode())
            return
        if status != 200:
            self._send(handler, status, answer.get("body", json.dumps({"error": {"message": "server error"}})).encode())
            return
        if "choices" in answer:
            completion: dict[str, Any] = {"id": "x", "object": "chat.completion", "created": 0,
                                          "model": request.get("model", ""), "choices": answer["choices"]}
            self._send(handler, 200, json.dumps(completion).encode())
            return
        if "content_repeat" in answer:
            prefix, unit, count = answer["content_repeat"]
            content = prefix + unit * int(count)
        elif "echo_auth" in answer:
            content = answer["echo_auth"].replace("{auth}", auth)
        else:
            content = answer["content"]
        completion = {
            "id": f"chatcmpl-{self._served}", "object": "chat.completion", "created": 0,
            "model": request.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
        if "usage" in answer:
            completion["usage"] = answer["usage"]
        self._send(handler, 200, json.dumps(completion).encode())

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def serve_forever(recording: str, port_file: Path) -> None:
    """Run a server for a subprocess test: writes its base URL to `port_file`, serves until killed."""
    server = LoopbackServer(load_recording(recording))
    with server:
        port_file.write_text(server.base_url)
        threading.Event().wait()


if __name__ == "__main__":
    import sys

    serve_forever(sys.argv[1], Path(sys.argv[2]))
