"""Kernel-tier tests of the southbounds."""
