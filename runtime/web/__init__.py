"""The project's web service (ESP's streaming web service, docs/deploy.md "The web service"): a
small HTTP and WebSocket server over a run directory and its input directories.

- ``POST /elements/ELEMENT/rows``: rows for an input element, written to its inbox as ``ccl
  publish`` writes files (:class:`runtime.adapters.inbox.Inbox`), answered once on disk.
- ``GET /elements/ELEMENT/changes`` (WebSocket): the element's changes, batch by batch, read from
  its changelog as ``ccl subscribe`` reads them.
- ``GET /elements/ELEMENT/rows``: the element's current rows, replayed from its changelog.

It needs nothing from Spark: it reads and writes files only, so it runs beside the driver
(:mod:`runtime.web.__main__`, started by ``ccl deploy``'s supervisor) and survives nothing the
project does not. :mod:`.server` holds the routes (:func:`runtime.web.server.make_app`).
"""
