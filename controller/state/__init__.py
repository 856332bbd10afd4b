"""Recorded fabric state: the failure-state file and the lock that makes one writer at a time."""
