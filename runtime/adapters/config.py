"""The adapter types this runtime runs beyond the CSV/XML file adapters, with ESP's type names,
and their properties (ESP's property IDs, any case) checked before a run starts."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

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
# input adapters that write into their element's inbox
INBOX_INPUTS = tuple(SOCKET_INPUTS) + DB_INPUTS
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


def _float(props: dict, key: str, default: float, adapter: str) -> float:
    value = props.get(key, default)
    try:
        out = float(str(value).strip())
    except ValueError:
        raise AdapterError(f"adapter '{adapter}': {key} {value!r} is not a number") from None
    if out < 0:
        raise AdapterError(f"adapter '{adapter}': {key} must not be negative")
    return out


def socket_spec(adapter: dict, base_dir: str) -> SocketSpec:
    """The :class:`SocketSpec` of a socket adapter of the plan; AdapterError when its properties
    cannot be used (no port, a port that is no number, a bad format property)."""
    kind = str(adapter["type"]).lower()
    payload, side = (SOCKET_INPUTS if adapter["direction"] == "input" else SOCKET_OUTPUTS)[kind]
    props = adapter_properties(adapter.get("properties"))
    name = adapter["name"]
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
        CsvFormat.from_options(fmt_props, adapter["element"])
        if "hasheader" in props:
            property_flag(props["hasheader"], "hasHeader")
    except ValueError as exc:
        raise AdapterError(f"adapter '{name}': {exc}") from None
    return SocketSpec(name, adapter["element"], payload, server, host, port, ep_file,
                      _float(props, "retryperiod", 5.0, name), _int(props, "retrynumber", 0, name),
                      _float(props, "batchmillis", 50.0, name) / 1000.0, props)


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
