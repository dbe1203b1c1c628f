"""Video: probe a container against limits, decode frames in bounded chunks, track and smooth faces, encode H.264.

Pure code (PyAV, numpy): no Ray. Frames follow the image contract (``(h, w, 3)`` RGB uint8), upright: the source's
display rotation is applied on decode and written back as the same display matrix on encode.
"""
