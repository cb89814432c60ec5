"""Example applications built on ziggurat."""
