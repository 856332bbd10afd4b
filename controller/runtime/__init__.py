"""P4Runtime sessions: bindings, encoding, the switch client, reconcile, TLS."""
