"""MRC-style endpoint transport: hosts spray RoCEv2 over their own SRv6 EVs and route around failures themselves."""
