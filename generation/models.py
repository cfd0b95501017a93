"""Generation runs."""
