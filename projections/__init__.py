"""The read side: projections folded from the ledger, and the APIs built on them.

``backend`` is ARI's memory API (with the ``research``, ``verified``, ``audit`` and
``working`` mixins); ``catalog`` and ``semantic`` are the local folds, ``projector`` keeps
them with a cursor and a snapshot; ``letta`` folds into a Letta server; ``mcp_server`` and
``cli`` are thin adapters.
"""
