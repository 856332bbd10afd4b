"""The bmv2 node backend: simple_switch_grpc processes under Mininet, programmed over P4Runtime."""
