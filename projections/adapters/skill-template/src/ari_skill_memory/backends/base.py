"""ARI's ``MemoryBackend`` type (ari-core names it by this path for type checking)."""
from projections.api.backend import MemoryBackend

__all__ = ["MemoryBackend"]
