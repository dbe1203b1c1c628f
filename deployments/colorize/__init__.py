"""Colorization of black-and-white photos (DDColor)."""
