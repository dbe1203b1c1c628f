"""Shared building blocks: image I/O, errors, model store, batching helpers."""
