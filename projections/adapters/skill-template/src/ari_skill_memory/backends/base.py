"""ARI's ``MemoryBackend`` type (ari-core names it by this path for type checking)."""
from projections.api import MemoryBackend

__all__ = ["MemoryBackend"]
