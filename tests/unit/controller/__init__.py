"""Unit tests of the controller package, by module path."""
