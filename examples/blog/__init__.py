"""A blog served from the ziggurat HTTP response cache (see README.md)."""
