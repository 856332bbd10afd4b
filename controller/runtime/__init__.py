"""The P4Runtime client: P4Info index, codec and wire encoding, one switch's connection, reconcile, many switches, TLS."""
