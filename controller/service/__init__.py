"""`fabricctl run`: a long-running controller that probes every fabric link and heals the fabric by itself."""
