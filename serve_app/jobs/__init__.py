"""Per-job orchestration (no Ray): decode, await the model stages, composite, encode."""
