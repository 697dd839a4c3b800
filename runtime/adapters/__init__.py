"""The adapter layer: what connects a running project to systems other than its input and output
files (docs/io.md "Adapters").

- Input adapters never hand rows to Spark. Each writes what it receives, in arrival order, to its
  element's inbox (:mod:`.inbox`): the directory the element's reader lists, in the replay-stable
  files ``ccl publish`` writes. The reader (runtime/inputs, the project's query) numbers them,
  parses them (CSV, XML list or JSON, :mod:`runtime.inputs.json_rows`) and turns bad input into bad
  records; its checkpoint makes a restart read each file once. So an adapter is only a transport:
  :mod:`.socket_input` (client or server), and :mod:`.postgres` ``DbInput`` (polls a table or
  query, its position kept with the inbox files).
- Output adapters are fed per micro-batch from their element's changelog (:mod:`.output`), so they
  need nothing from the query that made the rows, and a replayed batch is recognised by its number
  (:mod:`.postgres` ``DbSink`` also records it in the database, in the batch's transaction).
- :mod:`.service` starts them with a run and stops them with it; :mod:`.config` holds the type
  names (ESP's) and reads their properties.
"""
