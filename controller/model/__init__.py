"""The fabric model: topology, uSID/SID plan, congestion thresholds, TLS settings, failures, input bounds, YAML."""
