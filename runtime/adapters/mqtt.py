"""MQTT input and output adapters (paho-mqtt).

**Input** (``mqtt_input``): subscribe to ``mqttTopic`` (comma-separated filters, ``+``/``#``
wildcards) at ``mqttQos``; each message's payload (CSV lines or JSON, one or more records) goes,
in arrival order, into the element's inbox (runtime/adapters/inbox.py), messages gathered into one
file for up to ``batchMillis`` (50 ms). The element's reader parses it: bad rows are its bad
records. A message whose text does not end its last record (an open CSV quote, an unclosed JSON
bracket) gets a file of its own, so that it cannot swallow the messages after it.

QoS 1 and 2 messages are acknowledged (paho's manual acknowledgement) only once their inbox file is
on disk. With a persistent session (``mqttCleanSession`` false, the default, and a fixed client
id) the broker keeps what was not acknowledged while the adapter is away and sends it again, with
the DUP flag, when it reconnects. A message written but not yet acknowledged when the process died
would then be written twice: before an inbox file appears, the packet ids and a digest of the
topic and payload of its QoS > 0 messages are appended to a journal (``RUN/adapters/NAME.mqtt-
journal``, flushed to disk); a redelivered (DUP) message whose packet id and digest match a
message of a journaled file that exists is acknowledged and dropped. So, for QoS 1, each message
the broker accepted reaches the inbox exactly once across ``kill -9`` and restarts (a broker that
loses its session store, or a publisher that sends the same payload twice under a packet id that
is still being redelivered, are outside this). QoS 2 is exactly once while the process lives, but
paho keeps a QoS 2 message in memory between PUBREC and PUBREL: a kill -9 in that window loses it.
QoS 0 is at most once.

**Output** (``mqtt_output``): each change of a delivered micro-batch is one message on
``mqttTopic``: a CSV line (the opcode first, or ESP's ``NAME,opcode,fields`` with
``prependStreamNameOpcode``, or the bare fields with ``hasHeader`` false) or a JSON object with
``ESP_OPS``; the batch counts as delivered once the broker acknowledged every message (QoS 1/2).
A batch published but not yet recorded when the process died is published again after a restart:
at least once, as the socket outputs.

Both reconnect on their own (waits from 0.1 s doubling up to ``retryPeriod`` seconds) and report
their state (``connected``, ``retrying``, ``stopped``) in ``RUN/adapters/NAME.json``; the input
is ``connected`` once the broker acknowledged its subscription (``subscribing`` before: a message
published then may not be routed to it; ``failed`` when the broker refused it).
"""
from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import threading
import time
from typing import Any, Optional

from .config import MqttSpec
from .framing import CsvFramer, JsonFramer
from .inbox import MAX_BATCH_BYTES, Inbox
from .status import Status

log = logging.getLogger("ccl.runtime")
FIRST_RETRY = 0.1
JOURNAL_KEEP = 64              # journaled files whose messages a redelivery is checked against
JOURNAL_MAX_BYTES = 4 << 20    # the journal is cut down to its last JOURNAL_KEEP lines beyond this
FLUSH_UNACKED = 5000           # unacknowledged messages that make a batch due at once (MQTT 5)


def _client(spec: MqttSpec, manual_ack: bool):
    """A paho client for ``spec``, connecting in the background (paho's network thread, which
    reconnects after a lost connection)."""
    import paho.mqtt.client as paho

    if spec.version == 5:
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=spec.client_id,
                             protocol=paho.MQTTv5, manual_ack=manual_ack)
    else:
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=spec.client_id,
                             clean_session=spec.clean_session, protocol=paho.MQTTv311,
                             manual_ack=manual_ack)
    if spec.username is not None:
        client.username_pw_set(spec.username, spec.password)
    if spec.tls:
        client.tls_set()
    # paho's waits are typed int but taken as seconds of any kind
    client.reconnect_delay_set(min_delay=FIRST_RETRY,  # type: ignore[arg-type]
                               max_delay=max(spec.retry_period, FIRST_RETRY))  # type: ignore[arg-type]
    return client


def _connect(client, spec: MqttSpec) -> None:
    """Start connecting. MQTT 5: a persistent session never expires unless ``mqttCleanSession``,
    and the broker may send up to 65,535 unacknowledged messages (Receive Maximum), so that
    holding acknowledgements for a batch's inbox file does not hold the broker back."""
    if spec.version == 5:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        props = Properties(PacketTypes.CONNECT)
        props.ReceiveMaximum = 65535
        if not spec.clean_session:
            props.SessionExpiryInterval = 0xFFFFFFFF
        client.connect_async(spec.host, spec.port, keepalive=spec.keepalive,
                             clean_start=spec.clean_session, properties=props)
    else:
        client.connect_async(spec.host, spec.port, keepalive=spec.keepalive)
    client.loop_start()


def digest(topic: str, payload: bytes) -> str:
    """What identifies a message's content in the journal."""
    return hashlib.blake2b(topic.encode("utf-8", "replace") + b"\0" + payload,
                           digest_size=8).hexdigest()


class AckJournal:
    """The packet ids and digests of the QoS > 0 messages of the last :data:`JOURNAL_KEEP` inbox
    files, appended (and flushed) before each file appears; see the module docstring."""

    def __init__(self, path: str, inbox_dir: str) -> None:
        self.path = path
        self.inbox_dir = inbox_dir
        self.batches: collections.deque = collections.deque()
        self.recent: dict[int, str] = {}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        for entry in self._read()[-JOURNAL_KEEP:]:
            if os.path.exists(os.path.join(inbox_dir, entry["file"])):
                self._remember([(int(m), d) for m, d in entry["ids"]])

    def _read(self) -> list[dict]:
        out = []
        try:
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut short by a crash: its file was never linked
        except OSError:
            pass
        return out

    def _remember(self, ids: list[tuple[int, str]]) -> None:
        self.batches.append(ids)
        for mid, d in ids:
            self.recent[mid] = d
        while len(self.batches) > JOURNAL_KEEP:
            for mid, d in self.batches.popleft():
                if self.recent.get(mid) == d:
                    del self.recent[mid]

    def holds(self, mid: int, d: str) -> bool:
        """Whether a message with packet id ``mid`` and digest ``d`` is in a journaled file."""
        return self.recent.get(mid) == d

    def append(self, name: str, ids: list[tuple[int, str]]) -> None:
        """Journal that the inbox file ``name`` holds ``ids`` (on disk when this returns)."""
        if not ids:
            return
        line = json.dumps({"file": name, "ids": ids}, separators=(",", ":")) + "\n"
        if os.path.exists(self.path) and os.path.getsize(self.path) > JOURNAL_MAX_BYTES:
            self._compact()
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._remember(ids)

    def _compact(self) -> None:
        keep = self._read()[-JOURNAL_KEEP:]
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for entry in keep:
                f.write(json.dumps(entry, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class MqttInput:
    """One MQTT input adapter: paho's network thread receives, a thread of ours publishes batches
    to the inbox and then acknowledges them."""

    def __init__(self, spec: MqttSpec, inbox_dir: str, status: Status, journal: str) -> None:
        self.spec = spec
        self.inbox = Inbox(inbox_dir, spec.name, "json" if spec.payload == "json" else "csv")
        self.status = status
        self.journal = AckJournal(journal, inbox_dir)
        self._cond = threading.Condition()
        # (mid, qos, digest, payload, whole) of the messages received and not yet in the inbox
        self._pending: list[tuple[int, int, str, bytes, bool]] = []
        self._writing: list[tuple[int, int, str, bytes, bool]] = []  # taken, not yet in a file
        self._pending_bytes = 0
        self._unacked = 0  # QoS > 0 messages among the pending
        # MQTT 3.1.1 has no Receive Maximum: the broker stops at its own limit of unacknowledged
        # messages (mosquitto's max_inflight_messages, 20), so a batch is due when it is reached
        self._flush_unacked = FLUSH_UNACKED if spec.version == 5 else spec.max_inflight
        self._since: Optional[float] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._client: Any = None
        self._subscribe_mid: Optional[int] = None
        self.duplicates = 0

    def start(self) -> "MqttInput":
        client = _client(self.spec, manual_ack=True)
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        self._client = client
        self.status.update(state="connecting", address=f"{self.spec.host}:{self.spec.port}",
                           topics=list(self.spec.topics), qos=self.spec.qos, messages=0,
                           duplicates=0)
        _connect(client, self.spec)
        self._thread = threading.Thread(target=self._publish_loop, daemon=True,
                                        name=f"ccl-adapter-{self.spec.name}")
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop receiving; what was received is published to the inbox (and acknowledged) first."""
        client = self._client
        if client is not None:
            client.on_message = None  # nothing more is taken in; the broker keeps the rest
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        if client is not None:
            try:
                client.disconnect()
            except Exception:  # already gone
                pass
            client.loop_stop()
        self.status.update(state="stopped")

    # -- paho callbacks (its network thread) ----------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self.status.add(retries=1)
            self.status.update(state="retrying", last_error=f"broker refused: {reason_code}")
            return
        # "connected" waits for the SUBACK: paho sends the SUBSCRIBE only after this callback
        # returns, and a message published before the broker has the subscription is not ours
        # (a new session holds none), so whoever waits for "connected" to publish would lose it
        self._subscribe_mid = client.subscribe([(t, self.spec.qos) for t in self.spec.topics])[1]
        self.status.add(connections=1)
        self.status.update(state="subscribing", session_present=bool(flags.session_present))

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if mid != self._subscribe_mid:
            return
        refused = [t for t, rc in zip(self.spec.topics, reason_codes) if rc.is_failure]
        if refused:  # the broker's ACL, say: nothing comes until a reconnect subscribes again
            self.status.update(state="failed",
                               last_error=f"broker refused the subscription to {', '.join(refused)}")
            log.warning("adapter %s: broker refused the subscription to %s", self.spec.name,
                        ", ".join(refused))
            return
        self.status.update(state="connected")

    def _on_connect_fail(self, client, userdata) -> None:
        self.status.add(retries=1)
        self.status.update(state="retrying",
                           last_error=f"cannot connect to {self.spec.host}:{self.spec.port}")

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        if not self._stop.is_set():
            self.status.update(state="retrying", last_error=f"disconnected: {reason_code}")

    def _on_message(self, client, userdata, msg) -> None:
        payload = bytes(msg.payload)
        d = digest(msg.topic, payload) if msg.qos > 0 else ""
        with self._cond:
            if msg.qos > 0 and msg.dup:
                if self.journal.holds(msg.mid, d):  # in the inbox already: acknowledge it again
                    self.duplicates += 1
                    self.status.update(duplicates=self.duplicates)
                    client.ack(msg.mid, msg.qos)
                    return
                if any(p[0] == msg.mid and p[2] == d for p in (*self._pending, *self._writing)):
                    self.duplicates += 1  # still waiting for its file: acknowledged with it
                    self.status.update(duplicates=self.duplicates)
                    return
            if not payload.endswith(b"\n"):
                payload += b"\n"
            framer = JsonFramer() if self.spec.payload == "json" else CsvFramer()
            whole = len(framer.feed(payload)[0]) == len(payload)
            self._pending.append((msg.mid, msg.qos, d, payload, whole))
            self._pending_bytes += len(payload)
            if self._since is None:
                self._since = time.monotonic()
            if msg.qos > 0:
                self._unacked += 1
            if self._pending_bytes >= MAX_BATCH_BYTES or self._unacked >= self._flush_unacked:
                self._cond.notify_all()

    # -- publishing (our thread) ----------------------------------------------------------------
    def _due(self) -> Optional[float]:
        """Seconds until the pending messages are due (None: nothing pending)."""
        if self._since is None:
            return None
        if self._pending_bytes >= MAX_BATCH_BYTES or self._unacked >= self._flush_unacked:
            return 0.0
        return max(0.0, self._since + self.spec.batch_seconds - time.monotonic())

    def _publish_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stop.is_set():
                    due = self._due()
                    if due == 0.0:
                        break
                    self._cond.wait(0.2 if due is None else due)
                batch, self._pending, self._pending_bytes, self._since = self._pending, [], 0, None
                self._unacked = 0
                self._writing = batch  # a redelivery of these meanwhile is theirs, not new
            if batch:
                try:
                    self._write(batch)
                except Exception as exc:  # unacknowledged: the broker sends them again after
                    self.status.update(last_error=f"inbox: {exc}")  # the next reconnect
                    log.warning("adapter %s: %s", self.spec.name, exc)
                with self._cond:
                    self._writing = []
            if self._stop.is_set():
                with self._cond:
                    if not self._pending:
                        return

    def _write(self, batch: list[tuple[int, int, str, bytes, bool]]) -> None:
        """Publish ``batch`` to the inbox (a message that does not end its last record in a file
        of its own), then acknowledge its QoS > 0 messages."""
        groups: list[list] = [[]]
        for m in batch:
            if m[4]:
                groups[-1].append(m)
            else:
                groups.extend([[m], []])
        for group in groups:
            if not group:
                continue
            ids = [(m[0], m[2]) for m in group if m[1] > 0]
            data = b"".join(m[3] for m in group)
            self.inbox.publish(data, lambda name: self.journal.append(name, ids))
            for mid, qos, _, _, _ in group:
                if qos > 0:
                    self._client.ack(mid, qos)
            self.status.add(messages=len(group), records=data.count(b"\n"), files=1)


class MqttSink:
    """Publish each change of a batch as one message; the batch is delivered once every message
    is acknowledged (QoS 1/2) or sent (QoS 0)."""

    def __init__(self, spec: MqttSpec, enc, status: Status, stop: threading.Event) -> None:
        self.spec, self.enc, self.status, self.stop = spec, enc, status, stop
        self.give_up_at: Optional[float] = None  # set when the run ends: retry until then
        self.connected = threading.Event()
        client = _client(spec, manual_ack=False)
        client.max_inflight_messages_set(1000)
        client.max_queued_messages_set(0)
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        self.client = client
        status.update(state="connecting", address=f"{spec.host}:{spec.port}", topic=spec.topics[0],
                      qos=spec.qos)
        _connect(client, spec)

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self.status.add(retries=1)
            self.status.update(state="retrying", last_error=f"broker refused: {reason_code}")
            return
        self.connected.set()
        self.status.add(connections=1)
        self.status.update(state="connected")

    def _on_connect_fail(self, client, userdata) -> None:
        self.status.add(retries=1)
        self.status.update(state="retrying",
                           last_error=f"cannot connect to {self.spec.host}:{self.spec.port}")

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        self.connected.clear()
        self.status.update(state="retrying", last_error=f"disconnected: {reason_code}")

    def open(self, state: dict) -> None:
        pass

    def _gave_up(self) -> bool:
        """Whether to stop waiting for the broker: the run stopped and its grace time is over."""
        if self.give_up_at is not None:
            return time.monotonic() > self.give_up_at
        return self.stop.is_set()

    def deliver(self, rows: list[dict], state: dict) -> bool:
        payloads = [self.enc.encode(r).rstrip(b"\n") for r in rows]
        topic, qos = self.spec.topics[0], self.spec.qos
        infos = []
        i = 0
        while i < len(payloads):
            if not self.connected.wait(0.2):
                if self._gave_up():
                    return False
                continue
            info = self.client.publish(topic, payloads[i], qos=qos, retain=self.spec.retain)
            if info.rc != 0 and qos == 0:  # not sent: send it again once connected
                if not self.client.is_connected():
                    self.connected.clear()
                time.sleep(0.01)
                continue
            infos.append(info)  # QoS > 0: paho resends it after a reconnect
            i += 1
        for info in infos:
            while not info.is_published():
                if self._gave_up():
                    return False
                time.sleep(0.005)
        self.status.add(records=len(rows))
        return True

    def close(self) -> None:
        try:
            self.client.disconnect()
        except Exception:  # already gone
            pass
        self.client.loop_stop()
