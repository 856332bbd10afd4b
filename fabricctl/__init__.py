"""fabricctl: the command line on top of controller, mininet_labs and endpoint (one module per command group)."""
