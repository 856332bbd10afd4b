"""fabricctl: the command line on top of the controller, the labs and the endpoint (one module per command group)."""
