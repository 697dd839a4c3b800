"""The adapter types this runtime runs beyond the CSV/XML file adapters, with ESP's type names,
and their properties (ESP's property IDs, any case) checked before a run starts."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ccl.plan.model import Adapter

from ..inputs.formats import CsvFormat, adapter_properties, property_flag

# type -> (payload format, side): side None means "client when host is given, else server"
SOCKET_INPUTS = {
    "toolkit_socket_csv_input": ("csv", None),
    "toolkit_socket_json_input": ("json", None),
    "dsv_sockout_in": ("csv", "client"),   # ESP's Socket (as Client) CSV Input
    "dsv_sockin_in": ("csv", "server"),    # ESP's Socket (as Server) CSV Input
}
SOCKET_OUTPUTS = {
    "toolkit_socket_csv_output": ("csv", None),
    "toolkit_socket_json_output": ("json", None),
    "dsv_sockout_out": ("csv", "client"),  # ESP's Socket (as Client) CSV Output
    "dsv_sockin_out": ("csv", "server"),   # ESP's Socket (as Server) CSV Output
}
# ESP's Database input and output adapters, on PostgreSQL (runtime/adapters/postgres.py);
# hana_out writes to the database its properties name
DB_INPUTS = ("db_in",)
DB_OUTPUTS = ("db_out", "hana_out")
# SAP's MQTT input adapter type (the "MQTT custom input adapter" tutorial's id) and its output twin
MQTT_INPUTS = ("mqtt_input",)
MQTT_OUTPUTS = ("mqtt_output",)
# input types that write what they receive into the element's inbox (which the element reads)
INBOX_INPUTS = (*SOCKET_INPUTS, *MQTT_INPUTS, *DB_INPUTS)
JSON_FILE_INPUT = "toolkit_file_json_input"
JSON_FILE_OUTPUT = "toolkit_file_json_output"
LISTEN_ADDRESS = "127.0.0.1"


class AdapterError(ValueError):
    """An adapter whose properties cannot be used; the message names the adapter."""


@dataclass(frozen=True)
class SocketSpec:
    """Where and how a socket adapter connects (or listens)."""

    name: str                 # the adapter's name
    element: str
    payload: str              # "csv" or "json"
    server: bool              # listen (True) or connect (False)
    host: str                 # the server to connect to, or the address to listen on
    port: int                 # 0: any free port (a server; written to ep_file)
    ep_file: Optional[str]    # ESP's ephemeral port file
    retry_period: float       # the longest wait between two connection attempts (seconds)
    retry_number: int         # attempts in a row before giving up (0: never give up)
    batch_seconds: float      # how long a received record may wait for its inbox file
    properties: dict[str, Any]


def _int(props: dict, key: str, default: int, adapter: str) -> int:
    value = props.get(key, default)
    try:
        return int(str(value).strip())
    except ValueError:
        raise AdapterError(f"adapter '{adapter}': {key} {value!r} is not a whole number") from None


def non_negative(props: dict, key: str, default: float, adapter: str) -> float:
    """Property ``key`` (lower-case ID) of ``props`` as a number >= 0, ``default`` when absent;
    AdapterError naming ``adapter`` otherwise."""
    value = props.get(key, default)
    try:
        out = float(str(value).strip())
    except ValueError:
        raise AdapterError(f"adapter '{adapter}': {key} {value!r} is not a number") from None
    if out < 0:
        raise AdapterError(f"adapter '{adapter}': {key} must not be negative")
    return out


def socket_spec(adapter: Adapter, base_dir: str) -> SocketSpec:
    """The :class:`SocketSpec` of a socket adapter of the plan; AdapterError when its properties
    cannot be used (no port, a port that is no number, a bad format property)."""
    kind = adapter.type.lower()
    payload, side = (SOCKET_INPUTS if adapter.direction == "input" else SOCKET_OUTPUTS)[kind]
    props = adapter_properties(dict(adapter.properties))
    name = adapter.name
    host = str(props.get("host") or "").strip()
    server = side == "server" or (side is None and not host)
    ep_file = props.get("epfile") or None
    if ep_file:
        ep_file = os.path.join(base_dir, str(ep_file))
    if "port" not in props and not ep_file:
        raise AdapterError(f"adapter '{name}': a {kind} adapter needs a port (or an epFile)")
    port = _int(props, "port", -1, name)
    if port < -1 or port > 65535:
        raise AdapterError(f"adapter '{name}': port {port} is not a TCP port")
    if port == -1 and not ep_file:
        raise AdapterError(f"adapter '{name}': port -1 reads the port from the epFile, which is "
                           f"not given")
    if server:
        host = str(props.get("listenaddress") or LISTEN_ADDRESS)
        port = max(port, 0)
    else:
        host = host or "localhost"
    try:
        fmt_props = dict(props, fileformat=payload)
        CsvFormat.from_options(fmt_props, adapter.element)
        if "hasheader" in props:
            property_flag(props["hasheader"], "hasHeader")
    except ValueError as exc:
        raise AdapterError(f"adapter '{name}': {exc}") from None
    return SocketSpec(name, adapter.element, payload, server, host, port, ep_file,
                      non_negative(props, "retryperiod", 5.0, name), _int(props, "retrynumber", 0, name),
                      non_negative(props, "batchmillis", 50.0, name) / 1000.0, props)


def read_port(spec: SocketSpec) -> int:
    """The port a client connects to: ``port``, or the number in ``epFile`` when port is -1
    (0 while the file is missing or holds no number yet)."""
    if spec.port != -1:
        return spec.port
    try:
        with open(str(spec.ep_file), encoding="utf-8") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_port(spec: SocketSpec, port: int) -> None:
    """Tell clients the port a server listens on: ESP's ephemeral port file (written aside, then
    renamed), when the adapter names one."""
    if not spec.ep_file:
        return
    os.makedirs(os.path.dirname(os.path.abspath(spec.ep_file)), exist_ok=True)
    tmp = spec.ep_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"{port}\n")
    os.replace(tmp, spec.ep_file)


@dataclass(frozen=True)
class MqttSpec:
    """The broker, topic and session of an MQTT adapter (runtime/adapters/mqtt.py)."""

    name: str                 # the adapter's name
    element: str
    payload: str              # "csv" or "json"
    host: str
    port: int
    tls: bool                 # ssl:// or mqtts:// (the system's certificate authorities)
    topics: tuple[str, ...]   # filters (wildcards allowed) to subscribe to, or the one to publish to
    qos: int
    client_id: str
    username: Optional[str]
    password: Optional[str] = field(repr=False, compare=False)  # from the run's secrets file
    clean_session: bool
    keepalive: int            # seconds
    retry_period: float       # the longest wait between two connection attempts (seconds)
    batch_seconds: float      # how long a received message may wait for its inbox file
    retain: bool              # output: publish retained messages
    version: int              # MQTT protocol: 5 or 4 (3.1.1)
    max_inflight: int         # 3.1.1 input: QoS > 0 messages the broker sends before waiting
    properties: dict[str, Any]


def mqtt_payload(props: dict) -> str:
    """``csv`` or ``json``: an MQTT adapter's ``mqttMsgFormat`` (lower-case keys; default csv)."""
    return str(props.get("mqttmsgformat") or "csv").strip().lower()


def _server_uri(uri: str, adapter: str) -> tuple[str, int, bool]:
    """(host, port, tls) of ``tcp://host:port`` (also ``mqtt://``, ``ssl://``, ``mqtts://`` or a
    bare ``host[:port]``; the port defaults to 1883, 8883 with TLS)."""
    scheme, sep, rest = uri.strip().partition("://")
    if not sep:
        scheme, rest = "tcp", uri.strip()
    scheme = scheme.lower()
    if scheme not in ("tcp", "mqtt", "ssl", "mqtts"):
        raise AdapterError(f"adapter '{adapter}': mqttServerUri {uri!r}: the scheme must be tcp, "
                           f"mqtt, ssl or mqtts")
    tls = scheme in ("ssl", "mqtts")
    rest = rest.rstrip("/")
    if rest.startswith("["):  # [IPv6]:port
        host, _, port_text = rest[1:].partition("]")
        port_text = port_text.lstrip(":")
    else:
        host, _, port_text = rest.partition(":")
    if not host:
        raise AdapterError(f"adapter '{adapter}': mqttServerUri {uri!r} names no host")
    try:
        port = int(port_text) if port_text else (8883 if tls else 1883)
    except ValueError:
        raise AdapterError(f"adapter '{adapter}': mqttServerUri {uri!r}: {port_text!r} is not a "
                           f"port") from None
    if not 0 < port <= 65535:
        raise AdapterError(f"adapter '{adapter}': mqttServerUri {uri!r}: {port} is not a TCP port")
    return host, port, tls


def mqtt_spec(adapter: Adapter, run_dir: Optional[str] = None,
              secrets: Optional[Mapping[str, str]] = None) -> MqttSpec:
    """The :class:`MqttSpec` of an MQTT adapter of the plan; AdapterError when its properties
    cannot be used. Without ``mqttClientId`` the client id is fixed by the adapter's name and the
    run directory, so that a restart finds its persistent session again. ``secrets``: the
    adapter's secret properties (lower-case IDs, runtime/adapters/secrets.py; ``mqttPassword``
    is used: the plan never holds it)."""
    props = adapter_properties(dict(adapter.properties))
    name = adapter.name
    kind = adapter.type.lower()
    if not str(props.get("mqttserveruri") or "").strip():
        raise AdapterError(f"adapter '{name}': a {kind} adapter needs mqttServerUri "
                           f"(tcp://host:port)")
    host, port, tls = _server_uri(str(props["mqttserveruri"]), name)
    topics = tuple(t.strip() for t in str(props.get("mqtttopic") or "").split(",") if t.strip())
    if not topics:
        raise AdapterError(f"adapter '{name}': a {kind} adapter needs mqttTopic")
    output = adapter.direction == "output"
    if output and (len(topics) > 1 or any(c in topics[0] for c in "+#")):
        raise AdapterError(f"adapter '{name}': mqttTopic {topics[0]!r}: an output publishes to one "
                           f"topic, without wildcards")
    qos = _int(props, "mqttqos", 1, name)
    if qos not in (0, 1, 2):
        raise AdapterError(f"adapter '{name}': mqttQos {qos} must be 0, 1 or 2")
    payload = mqtt_payload(props)
    if payload not in ("csv", "json"):
        raise AdapterError(f"adapter '{name}': mqttMsgFormat {payload!r} must be csv or json")
    client_id = str(props.get("mqttclientid") or "").strip()
    if not client_id:
        import hashlib
        where = hashlib.sha1(os.path.abspath(run_dir or ".").encode()).hexdigest()[:10]
        client_id = f"ccl-{name}-{where}"[:64]
    try:
        clean = property_flag(props.get("mqttcleansession", "false"), "mqttCleanSession")
        retain = property_flag(props.get("mqttretain", "false"), "mqttRetain")
        CsvFormat.from_options(dict(props, fileformat=payload), adapter.element)
    except ValueError as exc:
        raise AdapterError(f"adapter '{name}': {exc}") from None
    version_text = str(props.get("mqttversion") or "5").strip()
    if version_text not in ("5", "5.0", "3.1.1", "4"):
        raise AdapterError(f"adapter '{name}': mqttVersion {version_text!r} must be 5 or 3.1.1")
    max_inflight = _int(props, "mqttmaxinflight", 20, name)
    if max_inflight < 1:
        raise AdapterError(f"adapter '{name}': mqttMaxInflight must be at least 1")
    user = props.get("mqttusername")
    password = (secrets or {}).get("mqttpassword") or props.get("mqttpassword")
    return MqttSpec(name, adapter.element, payload, host, port, tls, topics, qos, client_id,
                    None if user in (None, "") else str(user),
                    None if password in (None, "") else str(password), clean,
                    _int(props, "mqttkeepalive", 60, name),
                    non_negative(props, "retryperiod", 5.0, name),
                    non_negative(props, "batchmillis", 50.0, name) / 1000.0, retain,
                    5 if version_text.startswith("5") else 4, max_inflight, props)
