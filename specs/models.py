"""Feature specs."""
