"""cartoon job."""
