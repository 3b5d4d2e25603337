"""ARI's backend factory: one ledger-backed ``MemoryBackend`` per checkpoint (``ARI_CHECKPOINT_DIR`` by default)."""
from projections.api import MemoryBackend, clear_backend_cache, get_backend

__all__ = ["MemoryBackend", "clear_backend_cache", "get_backend"]
