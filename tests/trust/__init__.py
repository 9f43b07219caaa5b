"""Issue 16: trust and failure boundaries, tested in fresh interpreters."""
