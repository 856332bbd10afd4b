"""Southbound interfaces: how the controller puts a switch's plan into a data plane (P4Runtime, Linux netlink)."""
