"""A URL shortener served by several worker processes, with ziggurat in front of its database."""
