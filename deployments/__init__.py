"""Pure image and model code for portrait-serve.

Everything under ``deployments/`` except the ``deployment.py`` modules is free of Ray, so it imports and tests
without a cluster. The image contract used throughout: ``numpy.ndarray`` of shape ``(H, W, 3)``, dtype ``uint8``,
**RGB** channel order, values 0..255, C-contiguous. Alpha travels separately as ``(H, W)`` uint8.
"""
