"""Mininet labs of bmv2 switches: multi-plane Clos fabrics with RoCEv2 traffic."""
