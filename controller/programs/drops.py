"""The drop reasons of both pipelines: the index of IngressPipe.drop_reasons (p4/include/defines.p4)."""

from __future__ import annotations

from enum import IntEnum

DROP_REASONS_COUNTER = "IngressPipe.drop_reasons"


class DropReason(IntEnum):
    """Why a switch dropped a packet (docs/pipeline.md, "Drop reasons")."""

    SRH_TRUNCATED = 1
    SRH_SEGMENTS_LEFT = 2
    ROUTING_TYPE = 3
    HOP_LIMIT = 4
    BTH_TRUNCATED = 5
    USID_NO_MATCH = 6
    NO_ROUTE = 7
    SRH_TOO_DEEP = 8
    SRH_LENGTH = 9
    SID_NO_NEXT = 10
    PARSER_OTHER = 11
    IPV4_CHECKSUM = 12
    IPV4_IHL = 13
    CONTROLLER = 14
    NO_PATH = 15
    DECAP_INVALID = 16
    NOT_IP = 17
    ECN_NOT_ECT = 18
    IPV6_VERSION = 19
    IPV6_LENGTH = 20
    SR_BOUNDARY = 21
    HOST_SOURCE = 22
    HOST_SR_STEERING = 23
