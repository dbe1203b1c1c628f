"""Object stores: local folders and S3-compatible buckets behind one interface."""
