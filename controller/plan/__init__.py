"""The plan: switch entities, plan values, deltas, probes' entries, EVs and reachability, computed from the model."""
