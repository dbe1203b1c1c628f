"""The GPU check's parts (``bench/gpu_check.py`` runs them): the shared timing, memory and report machinery,
and one module per model family."""
