"""Helpers the tests share (imported as ``support``; conftest only declares fixtures)."""
