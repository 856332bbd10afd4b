"""The two fabric programs' P4 names as the plan writes them (tables, actions, profiles) and their hash modes."""

from __future__ import annotations

from typing import Literal



Program = Literal["srv6_spray", "eecmp_qp_hash"]


SPRAY: Program = "srv6_spray"


EECMP: Program = "eecmp_qp_hash"


FABRIC_PROGRAMS: tuple[Program, ...] = (SPRAY, EECMP)


def fabric_program(name: str) -> Program:
    """`name` as a Program (a fabric program the plan writes entities for); ValueError, one line, if it is none."""
    for program in FABRIC_PROGRAMS:
        if program == name:
            return program
    raise ValueError(f"unknown fabric program {name!r}; known: {', '.join(FABRIC_PROGRAMS)}")


FLOW, QP, PACKET, PIN = 0, 1, 2, 3  # hash modes (docs/pipeline.md)


# srv6_spray names
SPRAY_DEST = "IngressPipe.headend.spray_dest"


PINNED_PATH = "IngressPipe.headend.pinned_path"


SPRAY_PATHS = "IngressPipe.headend.spray_paths"


SPRAY_SELECTOR = "IngressPipe.headend.spray_selector"


MY_SID = "IngressPipe.endpoint.my_sid"


ROUTES_V6 = "IngressPipe.routing.routes_v6"


SET_SPRAY = "IngressPipe.headend.set_spray"


DERIVE_SPRAY = "IngressPipe.headend.derive_spray"


LOCAL_LEAF = "IngressPipe.headend.local_leaf"


NO_PATH = "IngressPipe.headend.no_path"


VIA_SPINE = "IngressPipe.headend.via_spine"


USID_UN = "IngressPipe.endpoint.usid_un"


USID_UN_NEXT_HOP = "IngressPipe.endpoint.usid_un_next_hop"


END_DX6 = "IngressPipe.endpoint.end_dx6"


END_DT6 = "IngressPipe.endpoint.end_dt6"


SET_NEXT_HOP_V6 = "IngressPipe.routing.set_next_hop"


DROP_USID_UNKNOWN = "IngressPipe.routing.drop_usid_unknown"


HOST_POLICY = "IngressPipe.boundary.host_policy"


HOST_FIRST_USID = "IngressPipe.boundary.host_first_usid"


SR_BOUNDARY = "IngressPipe.boundary.sr_boundary"


HOST_SOURCE_ROUTING = "IngressPipe.boundary.host_source_routing"


FIRST_USID_ALLOWED = "IngressPipe.boundary.first_usid_allowed"


# both programs
THRESHOLDS = "IngressPipe.congestion.thresholds"


SET_THRESHOLDS = "IngressPipe.congestion.set_thresholds"


SET_HOST_PORT_THRESHOLDS = "IngressPipe.congestion.set_host_port_thresholds"


# eecmp_qp_hash names
HASH_POLICY = "IngressPipe.ecmp.hash_policy"


ECMP_ROUTES = "IngressPipe.ecmp.routes"


ECMP_SELECTOR = "IngressPipe.ecmp.ecmp_selector"


SET_HASH_MODE = "IngressPipe.ecmp.set_hash_mode"


SET_PIN = "IngressPipe.ecmp.set_pin"


SET_NEXT_HOP = "IngressPipe.ecmp.set_next_hop"


ECMP_DROP = "IngressPipe.ecmp.drop"
