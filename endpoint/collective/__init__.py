"""Collectives on a lab: every rank a process in its host, carrying its transfers over the endpoint's
reliable transport (endpoint.sender/receiver: PSNs, ACKs, retransmission) as real RoCEv2 frames.

    layout.py   what each rank sends and expects, packet by packet (PSN ranges per QP, payload pattern),
                and when a transfer may start and has finished (pure, no sockets)
    rank.py     the socket loop of one rank (`python3 -m endpoint.collective rank ...`)
    schemes.py  the path-selection schemes: program, plan options, EVs, sender policy, UDP source port
    run.py      a collective on a running lab: scheme installed, ranks started, fault injected, timeline read
"""
