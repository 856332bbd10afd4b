"""Kernel-tier tests of the controller package, by module path."""
