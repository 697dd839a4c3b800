"""The properties of the adapter types runtime/adapters runs (ESP's property IDs), so that ``ccl
check`` says which of an adapter's properties mean nothing here (CCL1307, one warning each) instead
of ignoring them silently. Property names are compared in any case.

This table is the compiler's side of runtime/adapters/config.py (which reads the properties at run
time); tests/test_adapters.py checks that both name the same types.
"""
from __future__ import annotations

from typing import Iterable, Optional

from ..diagnostics import Diagnostic
from ..syntax.nodes import Span

_CSV_IN = ("delimiter", "csvDelimiter", "hasHeader", "csvHasHeader", "expectStreamNameOpcode",
           "csvExpectStreamNameOpcode", "matchStreamName", "csvMatchStreamName", "dateFormat",
           "timestampFormat", "bigdatetimeFormat", "secondDateFormat", "msDateFormat",
           "csvSecondDateFormat", "csvMsDateFormat", "csvBigDatetimeFormat")
_CSV_OUT = ("delimiter", "csvDelimiter", "hasHeader", "csvHasHeader", "prependStreamNameOpcode",
            "csvPrependStreamNameOpcode", "expectStreamNameOpcode", "csvExpectStreamNameOpcode")
_JSON_IN = ("jsonColsMappingList", "jsonRootpath", "jsonSecondDateFormat", "jsonMsDateFormat",
            "jsonBigdatetimeFormat")
_SOCKET_IN = ("host", "port", "epFile", "retryPeriod", "retryNumber", "listenAddress", "batchMillis")
_SOCKET_OUT = ("host", "port", "epFile", "retryPeriod", "listenAddress")
_FILE_IN = ("dir", "file", "filePattern")
# password: through the run's secrets file, never the plan (runtime/adapters/secrets.py)
_DB = ("service", "host", "port", "dbName", "database", "user", "username", "password",
       "retryPeriod", "sourceSchema")
_DB_OUT = _DB + ("table", "batchSize", "keyColumns", "opcodeColumnName", "timestampColumnName",
                 "truncateTable")
_MQTT = ("mqttServerUri", "mqttTopic", "mqttQos", "mqttClientId", "mqttUsername", "mqttPassword",
         "mqttMsgFormat", "mqttCleanSession", "mqttKeepAlive", "mqttVersion", "mqttMaxInflight",
         "retryPeriod")

# type -> the properties the runtime reads
USED: dict[str, tuple[str, ...]] = {
    "toolkit_socket_csv_input": _SOCKET_IN + _CSV_IN,
    "dsv_sockout_in": _SOCKET_IN + _CSV_IN,
    "dsv_sockin_in": _SOCKET_IN + _CSV_IN,
    "toolkit_socket_json_input": _SOCKET_IN + _JSON_IN,
    "toolkit_socket_csv_output": _SOCKET_OUT + _CSV_OUT,
    "dsv_sockout_out": _SOCKET_OUT + _CSV_OUT,
    "dsv_sockin_out": _SOCKET_OUT + _CSV_OUT,
    "toolkit_socket_json_output": _SOCKET_OUT + ("jsonColsMappingList",),
    "toolkit_file_json_input": _FILE_IN + _JSON_IN,
    "toolkit_file_json_output": ("dir", "file", "jsonFormat", "jsonColsMappingList"),
    "db_in": _DB + ("table", "query", "sqlQuery", "pollperiod", "trackingColumn") + _CSV_IN,
    "db_out": _DB_OUT,
    "hana_out": _DB_OUT,
    "mqtt_input": _MQTT + ("batchMillis",) + _CSV_IN + _JSON_IN,
    "mqtt_output": _MQTT + ("mqttRetain",) + _CSV_OUT + ("jsonColsMappingList",),
}

_DB_BASE = "the table gets every change from the run's first batch on"
# per type: ESP properties that mean nothing for that type, and why (before IGNORED)
IGNORED_BY_TYPE: dict[str, dict[str, str]] = {
    kind: {"outputBase": _DB_BASE, "onlyBase": _DB_BASE,
           "dataWarehouseMode": "opcodeColumnName keeps every change instead",
           "bulkInsertArraySize": "each batch is written with COPY (batchSize rows a COPY)",
           "threadCount": "each batch is one transaction on one connection",
           "maxCommitSize": "each micro-batch is one transaction",
           "maxCommitInterval": "each micro-batch is one transaction",
           "useUpserts": "a keyed table gets each key's last row (an upsert) already",
           "permutation": "the table's columns are the element's, by name",
           "dateFormat": "date-times are written as timestamps",
           "timestampFormat": "date-times are written as timestamps"}
    for kind in ("db_out", "hana_out")
}

_DATES_OUT = "outputs write ISO date-times, as the CSV output files do"
# ESP properties that mean nothing here, and why (shown in the warning)
IGNORED: dict[str, str] = {
    "charsetName": "text is read and written as UTF-8",
    "keepAlive": "connections use the system's TCP settings",
    "inputBufferSize": "connections use the system's TCP settings",
    "bufferMaxSize": "records go to the inbox as they arrive",
    "timeFormat": "CCL has no time type",
    "csvTimeFormat": "CCL has no time type",
    "jsonTimeFormat": "CCL has no time type",
    "xmllistTimeFormat": "CCL has no time type",
    "outputBase": "subscribers get the changes of the batches run while they are connected",
    "onlyBase": "subscribers get the changes of the batches run while they are connected",
    "enableGdMode": "input adapters keep what they receive in the durable inbox, outputs "
                    "record the batches they delivered",
    "enableGdCache": "input adapters keep what they receive in the durable inbox",
    "gdSubscriberName": "outputs record the batches they delivered in the run directory",
    "gdBatchSize": "outputs are delivered per micro-batch",
    "maxPubPoolSize": "received records are published per inbox file",
    "maxPubPoolTime": "received records are published per inbox file (batchMillis)",
    "useTransactions": "received records are published per inbox file",
    "removeAfterProcess": "input files stay: a replayed batch reads them again",
    "scanDepth": "only the top level of dir is read",
    "pollingPeriod": "directories are listed at every trigger (runtime.poll_interval)",
    "accessMode": "files are read whole once they appear",
    "safeOps": "opcodes are applied as the element's kind defines",
    "skipDels": "opcodes are applied as the element's kind defines",
    "runtimeMode": "adapters run inside the project's driver",
}
_OUTPUT_DATES = ("jsonSecondDateFormat", "jsonMsDateFormat", "jsonBigdatetimeFormat",
                 "csvSecondDateFormat", "csvMsDateFormat", "csvBigDatetimeFormat", "dateFormat",
                 "timestampFormat")


def property_warnings(kind: str, direction: str, adapter: str,
                      properties: Iterable[tuple[str, Optional[Span]]],
                      fallback: Optional[Span]) -> list[Diagnostic]:
    """A CCL1307 warning for each property of an adapter of type ``kind`` that the runtime does
    not read (none for types not in :data:`USED`, whose properties are the file readers')."""
    used = USED.get(kind.lower())
    if used is None:
        return []
    known = {p.lower() for p in used}
    out = []
    properties = list(properties)
    if kind.lower() == "hana_out" and not {n.lower() for n, _ in properties} & {
            "service", "host", "port", "dbname", "database", "user", "username"}:
        out.append(Diagnostic("CCL1307", f"adapter '{adapter}' of type hana_out writes to the "
                              f"PostgreSQL database named by its service (or host, port, dbName) "
                              f"property; it names none, so it writes nothing", fallback))
    for name, span in properties:
        low = name.lower()
        if low in known or low == "propertyset":
            continue
        why = next((r for k, r in {**IGNORED, **IGNORED_BY_TYPE.get(kind.lower(), {})}.items()
                    if k.lower() == low), None)
        if why is None and direction == "output" and low in {p.lower() for p in _OUTPUT_DATES}:
            why = _DATES_OUT
        if why == _DATES_OUT:
            message = f"property '{name}' of adapter '{adapter}' is not supported; it is ignored ({why})"
        elif why is not None:
            message = f"property '{name}' of adapter '{adapter}' has no meaning on Spark; it is ignored ({why})"
        else:
            message = (f"property '{name}' is not one the {kind} adapter '{adapter}' reads here; it is "
                       f"ignored (it reads {', '.join(used)})")
        out.append(Diagnostic("CCL1307", message, span or fallback))
    return out
