"""``ari_skill_memory`` served by ari-memory-ledger: each module forwards to the ledger's backend.

ari-core reaches its memory through ``ari_skill_memory.backends`` and ``.context_builder``
(``ari.memory``); the logic lives once, in ari-memory-ledger, so these modules only forward.
"""
