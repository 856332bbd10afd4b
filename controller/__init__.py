"""Control plane for SRv6/uSID multi-plane Clos fabrics: topology, path plans, P4Runtime, failover."""
