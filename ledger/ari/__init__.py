"""ARI's formats, read into the log and never written by ARI through it: its ``node_report.json``
(``node_report``, ``report_file``), the artifact refs its reports and writers build
(``provenance``), a report turned into the typed entries it grounds (``consolidation``), and
its memory files and entries imported as events, idempotent by content (``importer``). They
stand on the storage below and are used by the read side; the storage never imports them."""
