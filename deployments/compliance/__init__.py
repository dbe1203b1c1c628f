"""The compliance gate: may this photo go through a model at all (nudity, a real photograph of a living person...)."""
