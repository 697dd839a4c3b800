"""The web service's routes (aiohttp): see the package docstring and docs/deploy.md.

``make_app(service)`` builds the application; further pages (such as a live status page) are
added in :func:`routes` beside the others, each a handler taking the request.
"""
from __future__ import annotations

import asyncio
import fnmatch
import hmac
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from aiohttp import WSMsgType, web

from ..adapters.inbox import Inbox
from ..inputs.formats import CsvFormat
from ccl.plan.model import Element, Plan

from ..run_setup import RunOptions, element_files
from .rows import (Contents, PostError, batch_number, changelog_files, prepare_csv, prepare_json,
                   read_changes)

MAX_BODY = 4 << 20  # bytes of one POST (as an adapter's inbox file, runtime.adapters.inbox)
POLL = 0.1  # seconds between two looks for new changelog files of a subscribed element
SHUTDOWN_TIMEOUT = 2.0  # seconds open requests get to finish when the service stops
ADAPTER_NAME = "web"  # the inbox files' name part (``STAMP-web.csv``)


@dataclass
class InputTarget:
    """Where rows posted to an input element go, and how its reader parses them."""

    directory: Optional[str]
    pattern: Optional[str]
    fmt: Optional[CsvFormat]
    problem: Optional[str] = None  # why rows cannot be posted to it
    inboxes: dict[str, Inbox] = field(default_factory=dict)


class WebService:
    """What the routes serve: one project's plan, its run directory (changelogs) and the input
    directories of its input elements (``inputs``: element to directory, as ``--input`` binds
    them)."""

    def __init__(self, plan: Plan, run_dir: str, inputs: dict[str, str], base_dir: str = ".",
                 token: str = "") -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.token = token
        self.elements = {e.name: e for e in plan.elements}
        self.targets: dict[str, InputTarget] = {}
        self.contents: dict[str, Contents] = {}
        options = RunOptions(inputs=dict(inputs), base_dir=base_dir, run_dir=run_dir)
        for e in plan.elements:
            if e.is_input:
                self.targets[e.name] = self._target(e, options)

    def _target(self, element: Element, options: RunOptions) -> InputTarget:
        try:
            files, props = element_files(element, self.plan, options)
            fmt = CsvFormat.from_options(props, element.name)
        except (ValueError, KeyError) as exc:
            return InputTarget(None, None, None, f"its adapter's properties cannot be used: {exc}")
        if files is None:
            return InputTarget(None, None, fmt, "it reads no files (bind it to a directory)")
        if files.file:
            return InputTarget(None, None, fmt, "it reads one file, not a directory")
        if fmt.xml_list:
            return InputTarget(None, None, fmt, "it reads XML lists (post to a CSV or JSON input)")
        return InputTarget(files.dir, files.pattern, fmt)

    def authorized(self, request: web.Request) -> bool:
        """Whether the request carries the token (always, when none is set)."""
        if not self.token:
            return True
        given = ""
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            given = header[7:].strip()
        elif "token" in request.query:
            given = request.query["token"]
        return hmac.compare_digest(given.encode(), self.token.encode())

    def post(self, name: str, body: bytes, content_type: str) -> dict:
        """Write posted rows to ``name``'s inbox (on disk when this returns): what was written and
        the bad records with their reasons. PostError when nothing can be written."""
        target = self.targets.get(name)
        if target is None:
            kind = "an element that is not an input" if name in self.elements else "no element"
            raise PostError(f"{name!r} is {kind} of this project; post to "
                            f"{', '.join(sorted(self.targets)) or 'none'}", 404)
        if target.problem is not None or target.directory is None or target.fmt is None:
            raise PostError(f"input {name} takes no posted rows: {target.problem}", 409)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise PostError("the request is not UTF-8 text") from None
        columns = _columns(self.elements[name])
        kind = content_type.split(";")[0].strip().lower()
        if kind in ("application/json", "application/x-ndjson", "application/jsonl"):
            prepared = prepare_json(text, name, columns, target.fmt)
        elif kind in ("text/csv", "text/plain"):
            prepared = prepare_csv(text, name, columns, target.fmt)
        else:
            raise PostError(f"content type {kind or 'none'}: post application/json or text/csv", 415)
        if target.pattern and target.pattern != "*":
            sample = f"20260101T000000.000000Z-{ADAPTER_NAME}.{prepared.ext}"
            if not fnmatch.fnmatchcase(sample, target.pattern):
                raise PostError(f"input {name} reads files matching {target.pattern!r}, which the "
                                f"web service's file names (*-{ADAPTER_NAME}.{prepared.ext}) do not", 409)
        inbox = target.inboxes.get(prepared.ext)
        if inbox is None:
            inbox = target.inboxes[prepared.ext] = Inbox(target.directory, ADAPTER_NAME, prepared.ext)
        path = inbox.publish(prepared.data)
        return {"element": name, "file": os.path.basename(path), "records": prepared.records,
                "accepted": prepared.records - len(prepared.bad), "bad": prepared.bad}

    def element(self, name: str) -> Element:
        """The element ``name`` (404 when the project has none)."""
        if name not in self.elements:
            raise web.HTTPNotFound(text=json.dumps({"error": f"no element {name!r}"}),
                                   content_type="application/json")
        return self.elements[name]

    def current(self, name: str) -> dict:
        """``name``'s current rows (:class:`Contents`), with its kind and key."""
        element = self.element(name)
        if name not in self.contents:
            self.contents[name] = Contents(self.run_dir, element)
        c = self.contents[name]
        now = c.current()
        return {"element": name, "kind": element.kind, "key": c.key, **now}


def _columns(element: Element) -> list[tuple[str, str]]:
    """``element``'s ``(name, CCL type)`` pairs, as the parsers and the changelog reader take them."""
    return [(c.name, c.type) for c in element.columns]


SERVICE = web.AppKey("service", WebService)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, ensure_ascii=False))


@web.middleware
async def _auth(request: web.Request, handler: Any) -> web.StreamResponse:
    service: WebService = request.app[SERVICE]
    if not service.authorized(request):
        return _json({"error": "a valid token is required (Authorization: Bearer TOKEN, or "
                               "?token=TOKEN for a WebSocket)"}, 401)
    return await handler(request)


async def _index(request: web.Request) -> web.Response:
    service: WebService = request.app[SERVICE]
    return _json({"project": service.plan.project,
                  "elements": [{"name": e.name, "kind": e.kind, "role": e.role,
                                "key": list(e.key), "columns": [list(c) for c in _columns(e)],
                                "post": e.name in service.targets
                                and service.targets[e.name].problem is None}
                               for e in service.plan.elements]})


async def _post_rows(request: web.Request) -> web.Response:
    service: WebService = request.app[SERVICE]
    name = request.match_info["element"]
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _json({"error": f"a request holds at most {MAX_BODY} bytes"}, 413)
    try:
        # writing and flushing the file blocks: not on the event loop
        answer = await asyncio.get_running_loop().run_in_executor(
            None, service.post, name, body, request.headers.get("Content-Type", ""))
    except PostError as exc:
        return _json({"error": str(exc)}, exc.status)
    except OSError as exc:
        return _json({"error": f"cannot write the rows: {exc.strerror or exc}"}, 503)
    return _json(answer)


async def _get_rows(request: web.Request) -> web.Response:
    service: WebService = request.app[SERVICE]
    name = request.match_info["element"]
    service.element(name)
    data = await asyncio.get_running_loop().run_in_executor(None, service.current, name)
    return _json(data)


async def _changes(request: web.Request) -> web.StreamResponse:
    """A WebSocket sending one JSON message per committed batch of the element:
    ``{"element", "batch", "changes": [{"op", "row"}]}``; ``?from=now`` (default) or
    ``?from=beginning``."""
    service: WebService = request.app[SERVICE]
    name = request.match_info["element"]
    element = service.element(name)
    start = request.query.get("from", "now")
    if start not in ("now", "beginning"):
        return _json({"error": "from: expected now or beginning"}, 400)
    ws = web.WebSocketResponse(heartbeat=30.0)
    await ws.prepare(request)
    loop = asyncio.get_running_loop()
    files = await loop.run_in_executor(None, changelog_files, service.run_dir, name)
    seen = set(files) if start == "now" else set()
    columns = _columns(element)
    await ws.send_json({"element": name, "columns": [list(c) for c in columns], "from": start,
                        "batch": batch_number(files[-1]) if files else None})
    reader = asyncio.ensure_future(ws.receive())
    try:
        while not ws.closed:
            for path in await loop.run_in_executor(None, changelog_files, service.run_dir, name):
                if path in seen:
                    continue
                try:
                    changes = await loop.run_in_executor(None, read_changes, path, columns)
                except (OSError, ValueError):
                    continue  # seen again at the next look
                seen.add(path)
                await ws.send_json({"element": name, "batch": batch_number(path), "changes": changes})
            done, _ = await asyncio.wait([reader], timeout=POLL)
            if done:
                msg = reader.result()
                if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED,
                                WSMsgType.ERROR):
                    break
                reader = asyncio.ensure_future(ws.receive())  # other messages are ignored
    except ConnectionResetError:  # the client went away
        pass
    finally:
        reader.cancel()
        await ws.close()
    return ws


def routes(app: web.Application) -> None:
    """The service's routes (a further page is one more line here)."""
    app.router.add_get("/", _index)
    app.router.add_post("/elements/{element}/rows", _post_rows)
    app.router.add_get("/elements/{element}/rows", _get_rows)
    app.router.add_get("/elements/{element}/changes", _changes)


def make_app(service: WebService) -> web.Application:
    """The aiohttp application serving ``service`` (every route behind the token check)."""
    app = web.Application(middlewares=[_auth], client_max_size=MAX_BODY)
    app[SERVICE] = service
    routes(app)
    return app


class Server:
    """The web service on its own event loop in a thread: :meth:`start` binds (returns the
    address), :meth:`stop` closes it."""

    def __init__(self, service: WebService, host: str = "127.0.0.1", port: int = 0) -> None:
        self.service = service
        self.host = host
        self.port = port
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self._runner: Optional[web.AppRunner] = None
        self._thread: Optional[Any] = None

    async def _start(self) -> int:
        # no access log: a WebSocket's query string may hold the token
        self._runner = web.AppRunner(make_app(self.service), access_log=None,
                                     shutdown_timeout=SHUTDOWN_TIMEOUT)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        addresses = self._runner.addresses
        return int(addresses[0][1]) if addresses else self.port

    def start(self) -> str:
        """Start serving in a daemon thread; the URL (OSError when the address cannot be bound)."""
        import threading

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ccl-web")
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self.loop)
        try:
            self.port = future.result(timeout=30)
        except BaseException:
            self.stop()
            raise
        return self.url

    def _run(self) -> None:
        assert self.loop is not None
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self) -> None:
        """Close the connections and the listening socket, then end the thread."""
        if self.loop is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.loop.close()
        self.loop = None
