"""Starting a run's adapters with it and stopping them with it (runtime/run.py)."""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Optional

from ccl.plan.model import Adapter, Element, Plan

from ..file_names import file_name
from .config import (DB_INPUTS, DB_OUTPUTS, JSON_FILE_OUTPUT, MQTT_INPUTS, MQTT_OUTPUTS,
                     SOCKET_INPUTS, SOCKET_OUTPUTS, AdapterError, mqtt_spec, socket_spec)
from .mqtt import MqttInput, MqttSink
from .output import Feed, SocketClientSink, SocketServerSink, encoder, json_file_sink
from .postgres import DbInput, DbSink, db_spec, names_database
from .secrets import adapter_secrets, read_secrets
from .socket_input import SocketInput
from .status import Status

log = logging.getLogger("ccl.runtime")
UNTIL_IDLE_RETRY = 10.0  # seconds an until-idle run retries a database input's server


def inbox_directory(run_dir: str, element: str, bound: Optional[str] = None) -> str:
    """Where a socket input adapter of ``element`` writes: the directory ``--input`` binds (a
    deployed project's input directory), else ``RUN/inbox/ELEMENT``."""
    if bound is not None and os.path.isdir(bound):
        return bound
    return os.path.join(run_dir, "inbox", file_name(element))


def check_adapters(plan: Plan, base_dir: str) -> None:
    """AdapterError, before anything runs, for socket, MQTT, database and JSON output adapters
    whose properties cannot be used."""
    elements = {e.name: e for e in plan.elements}
    for a in plan.adapters:
        kind = a.type.lower()
        element = elements.get(a.element)
        if element is None:
            continue
        spec = None  # a socket or MQTT adapter's, whose output format is checked below
        if (a.direction == "input" and kind in SOCKET_INPUTS
                or a.direction == "output" and kind in SOCKET_OUTPUTS):
            spec = socket_spec(a, base_dir)
        elif (a.direction == "input" and kind in DB_INPUTS
              or a.direction == "output" and kind in DB_OUTPUTS):
            if kind != "hana_out" or names_database(a):
                db_spec(a, element)
        elif kind in (MQTT_INPUTS if a.direction == "input" else MQTT_OUTPUTS):
            spec = mqtt_spec(a)
        elif a.direction == "output" and kind == JSON_FILE_OUTPUT:
            try:
                json_file_sink(a, element, base_dir)
            except ValueError as exc:
                raise AdapterError(f"adapter '{a.name}': {exc}") from None
        if spec is not None and a.direction == "output":
            try:
                encoder(spec.payload, a.element, element.columns, spec.properties)
            except ValueError as exc:
                raise AdapterError(f"adapter '{a.name}': {exc}") from None


class Adapters:
    """The socket, MQTT and database input adapters and the fed output adapters of one run."""

    def __init__(self, plan: Plan, run_dir: str, base_dir: str, inputs: dict[str, str]) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.base_dir = base_dir
        self.inputs = inputs
        self.status_dir = os.path.join(run_dir, "adapters")
        self.secrets = read_secrets(run_dir)  # passwords the plan leaves out (ccl run/deploy)
        self.sources: list[Any] = []  # SocketInput, MqttInput, DbInput
        self.feeds: list[Feed] = []
        self.stop_event = threading.Event()

    def start(self, live: bool) -> "Adapters":
        """Start the output feeds and, when the run goes on until stopped (``live``), the socket
        inputs (an until-idle run reads what is in the inboxes already). AdapterError when one
        cannot start (a port in use, say); what started is stopped again."""
        elements = {e.name: e for e in self.plan.elements}
        try:
            for a in self.plan.adapters:
                kind = a.type.lower()
                element = elements.get(a.element)
                if element is None:
                    continue
                if a.direction == "input" and (kind in SOCKET_INPUTS or kind in MQTT_INPUTS):
                    bound = self.inputs.get(a.element)
                    if bound is not None and not os.path.isdir(bound):
                        continue  # --input ELEMENT=FILE replaces the adapter
                    if live:
                        self._start_input(a, element, inbox_directory(self.run_dir, a.element, bound))
                elif a.direction == "input" and kind in DB_INPUTS:
                    bound = self.inputs.get(a.element)
                    if bound is not None and not os.path.isdir(bound):
                        continue
                    self._start_db_input(a, element, inbox_directory(self.run_dir, a.element, bound),
                                         live)
                elif a.direction == "output" and kind in DB_OUTPUTS:
                    if kind == "hana_out" and not names_database(a):
                        log.warning("output adapter '%s' (hana_out) names no database (service, or "
                                    "host/port/dbName): it writes nothing", a.name)
                        continue
                    self._start_output(a, element, kind)
                elif a.direction == "output" and (kind in SOCKET_OUTPUTS or kind in MQTT_OUTPUTS
                                                  or kind == JSON_FILE_OUTPUT):
                    self._start_output(a, element, kind)
        except (OSError, AdapterError) as exc:
            self.stop()
            raise AdapterError(str(exc)) from None
        return self

    def _start_input(self, adapter: Adapter, element: Element, inbox: str) -> None:
        status = Status(self.status_dir, adapter.name, adapter.type)
        if adapter.type.lower() in MQTT_INPUTS:
            journal = os.path.join(self.status_dir, file_name(adapter.name) + ".mqtt-journal")
            spec = mqtt_spec(adapter, self.run_dir, adapter_secrets(self.secrets, adapter.name))
            self.sources.append(MqttInput(spec, inbox, status, journal).start())
            return
        spec = socket_spec(adapter, self.base_dir)
        try:
            source = SocketInput(spec, inbox, element.columns, status).start()
        except OSError as exc:
            raise AdapterError(f"adapter '{adapter.name}' cannot listen on "
                               f"{spec.host}:{spec.port}: {exc.strerror or exc}") from None
        self.sources.append(source)

    def _start_db_input(self, adapter: Adapter, element: Element, inbox: str, live: bool) -> None:
        """A database input polls while the run goes on (``live``); an until-idle run reads what
        the database holds once, before its queries start (a server that is down is retried for
        UNTIL_IDLE_RETRY seconds, then reported)."""
        spec = db_spec(adapter, element, adapter_secrets(self.secrets, adapter.name))
        status = Status(self.status_dir, adapter.name, adapter.type)
        source = DbInput(spec, inbox, element.columns, status, self.status_dir)
        if live:
            self.sources.append(source.start())
            return
        import time
        if not source.poll_with_retries(time.monotonic() + UNTIL_IDLE_RETRY):
            log.warning("adapter %s: could not read %s: %s", adapter.name, spec.address(),
                        status.data.get("last_error"))
        source.stop()

    def _start_output(self, adapter: Adapter, element: Element, kind: str) -> None:
        status = Status(self.status_dir, adapter.name, adapter.type)
        sink: Any
        if kind in DB_OUTPUTS:
            sink = DbSink(db_spec(adapter, element, adapter_secrets(self.secrets, adapter.name)),
                          element, status, self.stop_event)
        elif kind == JSON_FILE_OUTPUT:
            sink = json_file_sink(adapter, element, self.base_dir)
            status.update(state="writing", path=sink.path)
        elif kind in MQTT_OUTPUTS:
            mspec = mqtt_spec(adapter, self.run_dir, adapter_secrets(self.secrets, adapter.name))
            enc = encoder(mspec.payload, element.name, element.columns, mspec.properties)
            sink = MqttSink(mspec, enc, status, self.stop_event)
        else:
            spec = socket_spec(adapter, self.base_dir)
            enc = encoder(spec.payload, element.name, element.columns, spec.properties)
            if spec.server:
                try:
                    sink = SocketServerSink(spec, enc, status, self.stop_event)
                except OSError as exc:
                    raise AdapterError(f"adapter '{adapter.name}' cannot listen on "
                                       f"{spec.host}:{spec.port}: {exc.strerror or exc}") from None
            else:
                sink = SocketClientSink(spec, enc, status, self.stop_event)
        self.feeds.append(Feed(self.run_dir, element, adapter.name, sink, status).start())

    def stop_inputs(self) -> None:
        """Stop the socket and MQTT inputs (what they received is in the inboxes when this
        returns)."""
        for source in self.sources:
            source.stop()
        self.sources = []

    def stop(self) -> None:
        """Stop the inputs, then deliver the outputs' last batches and close them."""
        self.stop_inputs()
        self.stop_event.set()
        for feed in self.feeds:
            feed.finish()
        self.feeds = []
