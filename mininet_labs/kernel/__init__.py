"""The kernel data plane lab: leaves and spines as Linux SRv6 routers in network namespaces (no bmv2, no Mininet)."""
