from dovecote.store.memory.adapter import MemoryPersistenceAdapter

__all__ = ["MemoryPersistenceAdapter"]
