"""The live run report: ``ccl status NAME --web`` serves the report of a deployed project
(:mod:`ccl.ops.report`) on 127.0.0.1, the page reloading itself when a micro-batch commits.

:func:`respond` answers one request path and knows nothing of HTTP servers, so that the web
service of deployed projects can mount it as a route; :func:`serve` is a small stdlib
``http.server`` around it.
"""
from __future__ import annotations

import http.server
from typing import Callable, Optional

from .report import ReportError, ReportSource, render, state_token

STATE_PATH = "state"  # relative URL the page polls: the run directory's state token


def respond(source: ReportSource, path: str, prefix: str = "/") -> tuple[int, str, bytes]:
    """(HTTP status, content type, body) of a GET of ``path``: the page at ``prefix``, its state
    token at ``prefix + state`` (the page reloads when the token changes)."""
    path = path.split("?", 1)[0]
    if path == prefix + STATE_PATH:
        return 200, "text/plain; charset=utf-8", state_token(source.run_dir).encode()
    if path in (prefix, prefix + "index.html"):
        try:
            page = render(source.report(), live=prefix + STATE_PATH)
        except ReportError as exc:
            return 503, "text/plain; charset=utf-8", f"{exc}\n".encode()
        return 200, "text/html; charset=utf-8", page.encode()
    return 404, "text/plain; charset=utf-8", b"not found\n"


def make_server(source: ReportSource, port: int = 0) -> http.server.ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:``port`` (0: any free port) serving :func:`respond`."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            status, ctype, body = respond(source, self.path)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # a request line per poll is noise
            pass

    return http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)


def serve(source: ReportSource, port: int = 0,
          started: Optional[Callable[[str], None]] = None) -> None:
    """Serve the live report until interrupted; ``started`` gets the page's URL."""
    server = make_server(source, port)
    try:
        if started:
            started(f"http://127.0.0.1:{server.server_address[1]}/")
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
