"""Is it still the same person: face embeddings (SFace where its weights are present, dlib's ResNet, a built-in,
otherwise) and the verdict at the judge's operating point, for every job that changes a face."""
