"""The tools beside the log, run only when a person asks (ZODB keeps ``fsrecover`` and
``fspack`` beside ``FileStorage`` the same way): ``repair`` (keep a damaged log's valid
prefix), ``rollback`` (accept a log cut back, recorded), ``redact`` (a secret's events sealed,
the chain kept) and ``bundle`` (export and import of a portable, verified copy). Each takes the
log's lock through :class:`ledger.Ledger`; the storage never imports them."""
