"""restore job."""
