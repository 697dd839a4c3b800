"""Input adapters' files as Spark streams: formats and properties (:mod:`.formats`), field values
(:mod:`.values`), the CSV parsers (:mod:`.csv_text`, :mod:`.csv_arrow`) and the XML list parser
(:mod:`.xml_list`), file discovery (:mod:`.listing`), the ``ccl_csv`` data source (:mod:`.source`)
and native input streams over Spark's file source (:mod:`.file_input`)."""
