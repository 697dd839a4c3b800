"""What a .ccr means for the runtime settings, and a warning for each part that means nothing on Spark.

- A Cluster whose Managers are Spark master URLs sets ``spark.master`` (several ``spark://`` managers
  of one cluster become one high-availability URL ``spark://a:7077,b:7077``). The cluster of type
  ``local`` (where ESP deploys the project) is preferred; ESP manager URLs (``http://host:19011``,
  ``esp://...``) are warned about and ignored.
- Option ``bad-record-file`` sets ``runtime.bad_record_path``; option ``debug-level`` (syslog levels
  0-7) sets ``runtime.log_level``; options ``web.enabled``, ``web.host``, ``web.port`` and
  ``web.token`` set the web service's settings of those names.
- Every other option, ``ha="true"``, failover, affinities, extra instances and stream bindings get one
  warning each (CCL1307) and are otherwise ignored.
"""
from __future__ import annotations

from typing import Optional

from .ccr import CcrCluster, CcrFile, CcrValue
from .settings import SETTINGS, SOURCE_CCR, Setting, is_spark_master
from ..diagnostics import Diagnostic
from ..syntax.nodes import Span

# ESP's debug-level is a syslog severity; the log level shows that severity and worse.
DEBUG_LEVELS = {0: "FATAL", 1: "FATAL", 2: "FATAL", 3: "ERROR", 4: "WARN", 5: "INFO", 6: "INFO",
                7: "DEBUG"}

# ESP deployment options with no counterpart here, and why (shown in the warning).
IGNORED_OPTIONS = {
    "time-granularity": "Spark triggers micro-batches by runtime.trigger_interval",
    "java-max-heap": "memory is set with spark-submit --driver-memory and --executor-memory",
    "ignore-config-topology": "there is no ESP cluster topology on Spark",
    "utf8": "strings are always Unicode on Spark",
    "precision": "Spark decimals carry their own precision",
    "java-classpath": "Spark jars are given to spark-submit",
    "clock-time": "Spark has no settable project clock",
    "clock-rate": "Spark has no settable project clock",
}


# Options that set the web service's settings of the same name (docs/deploy.md "The web service").
WEB_OPTIONS = ("web.enabled", "web.host", "web.port", "web.token")


def _ignored(message: str, span: Span) -> Diagnostic:
    return Diagnostic("CCL1307", message, span)


def settings_from_ccr(ccr: CcrFile) -> tuple[list[Setting], list[Diagnostic]]:
    """The settings a .ccr gives (source ``.ccr``, span = the element), and its diagnostics."""
    settings: list[Setting] = []
    diags: list[Diagnostic] = []
    master = _master(ccr, diags)
    if master is not None:
        settings.append(master)
    for binding in ccr.bindings:
        diags.append(_ignored(f"binding '{binding.name}' to a stream of another ESP project has no "
                              f"meaning on Spark; it is ignored (connect the stream with an input "
                              f"adapter instead)", binding.span))
    deployment = ccr.deployment
    if deployment is None:
        return settings, diags
    if deployment.ha:
        diags.append(_ignored("ha=\"true\" has no meaning on Spark; it is ignored (a restarted query "
                              "resumes from its checkpoint)", deployment.span))
    for index, instance in enumerate(deployment.instances):
        if index > 0:
            diags.append(_ignored("a second <Instance> has no meaning on Spark; it is ignored (Spark "
                                  "schedules the job's tasks itself)", instance.span))
            continue
        if instance.failover:
            diags.append(_ignored("<Failover enable=\"true\"> has no meaning on Spark; it is ignored "
                                  "(a restarted query resumes from its checkpoint)", instance.span))
        for affinity in instance.affinities:
            diags.append(_ignored("an <Affinity> has no meaning on Spark; it is ignored (Spark "
                                  "places tasks itself)", affinity.span))
    for option in deployment.options:
        name = option.name.lower()
        if name == "debug-level":
            text = option.value.strip()
            if not (text.isdigit() and int(text) in DEBUG_LEVELS):
                diags.append(Diagnostic("CCL1322", f"invalid value for option debug-level: "
                                        f"'{option.value}' is not a level from 0 to 7", option.span))
                continue
            settings.append(Setting("runtime.log_level", DEBUG_LEVELS[int(text)], SOURCE_CCR,
                                    option.span))
        elif name == "bad-record-file":
            try:
                path = SETTINGS["runtime.bad_record_path"].parse(option.value)
            except ValueError as exc:
                diags.append(Diagnostic("CCL1322", f"invalid value for option bad-record-file: {exc}",
                                        option.span))
                continue
            settings.append(Setting("runtime.bad_record_path", path, SOURCE_CCR, option.span))
        elif name in WEB_OPTIONS:
            try:
                value = SETTINGS[name].parse(option.value)
            except ValueError as exc:
                diags.append(Diagnostic("CCL1322", f"invalid value for option {option.name}: {exc}",
                                        option.span))
                continue
            settings.append(Setting(name, value, SOURCE_CCR, option.span))
        else:
            why = IGNORED_OPTIONS.get(name, "it is not an option this runtime knows")
            diags.append(_ignored(f"option '{option.name}' has no meaning on Spark; it is ignored "
                                  f"({why})", option.span))
    return settings, diags


def _master(ccr: CcrFile, diags: list[Diagnostic]) -> Optional[Setting]:
    """spark.master from the managers of the deploy cluster (type local first, then the others)."""
    chosen: Optional[tuple[CcrCluster, list[CcrValue]]] = None
    ordered = sorted(ccr.clusters, key=lambda c: c.type not in ("", "local"))
    for cluster in ordered:
        spark = [m for m in cluster.managers if is_spark_master(m.value)]
        for manager in cluster.managers:
            if not is_spark_master(manager.value):
                diags.append(_ignored(f"cluster manager '{manager.value}' of cluster "
                                      f"'{cluster.name}' is not a Spark master URL; it is ignored "
                                      f"(use spark://HOST:PORT to deploy to a Spark cluster)",
                                      manager.span))
        if not spark:
            continue
        if chosen is not None:
            diags.append(_ignored(f"cluster '{cluster.name}' is ignored: the project deploys to "
                                  f"cluster '{chosen[0].name}'", cluster.span))
            continue
        chosen = (cluster, spark)
    if chosen is None:
        return None
    cluster, managers = chosen
    standalone = [m for m in managers if m.value.startswith("spark://")]
    if len(standalone) == len(managers) and len(managers) > 1:
        # several standalone masters of one cluster: Spark's high-availability form
        url = "spark://" + ",".join(m.value[len("spark://"):] for m in managers)
        return Setting("spark.master", url, SOURCE_CCR, managers[0].span)
    for extra in managers[1:]:
        diags.append(_ignored(f"cluster manager '{extra.value}' is ignored: cluster "
                              f"'{cluster.name}' deploys to '{managers[0].value}'", extra.span))
    return Setting("spark.master", managers[0].value.strip(), SOURCE_CCR, managers[0].span)
