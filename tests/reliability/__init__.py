"""Reliability and security suite (issue 8): bad input, hostile content, failing dependencies, load."""
