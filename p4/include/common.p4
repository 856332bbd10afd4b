/* Controls both programs use: parser-error accounting, controller packet I/O, egress. */
#ifndef __COMMON_P4__
#define __COMMON_P4__

#include "parser.p4"
#include "congestion.p4"

/* Turns a parser error into a drop reason, naming the header the packet ended in. */
control ParserErrors(in headers_t hdr,
                     inout local_metadata_t meta,
                     in standard_metadata_t std) {
    apply {
        if (std.checksum_error == 1) {
            meta.drop_reason = DROP_IPV4_CHECKSUM;
            return;
        }
        if (std.parser_error == error.NoError) {
            return;
        }
        if (std.parser_error == error.PacketTooShort) {
            if (meta.parser_stage == STAGE_SRH) {
                meta.drop_reason = DROP_SRH_TRUNCATED;
            } else if (meta.parser_stage == STAGE_BTH) {
                meta.drop_reason = DROP_BTH_TRUNCATED;
            } else {
                meta.drop_reason = DROP_PARSER_OTHER;
            }
        } else if (std.parser_error == error.SrhTooDeep) {
            meta.drop_reason = DROP_SRH_TOO_DEEP;
        } else if (std.parser_error == error.SrhLength) {
            meta.drop_reason = DROP_SRH_LENGTH;
        } else if (std.parser_error == error.SrhSegmentsLeft) {
            meta.drop_reason = DROP_SRH_SEGMENTS_LEFT;
        } else if (std.parser_error == error.Ipv4IhlInvalid) {
            meta.drop_reason = DROP_IPV4_IHL;
        } else if (std.parser_error == error.Ipv6Version) {
            meta.drop_reason = DROP_IPV6_VERSION;
        } else if (std.parser_error == error.Ipv6Length) {
            meta.drop_reason = DROP_IPV6_LENGTH;
        } else if (std.parser_error == error.SrhPastEnd) {
            meta.drop_reason = DROP_SRH_TRUNCATED;
        } else {
            meta.drop_reason = DROP_PARSER_OTHER;
        }
    }
}

/* Packet-in: packets the controller asks for go to CPU_PORT: link probes (their own ethertype, from
 * fabric ports) and hosts' Neighbor Advertisements (RFC 4861 section 4.4) answering the controller's
 * Neighbor Solicitations to a host NIC, addressed to the controller's probe link-local address. */
control CpuPunt(in headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t std) {
    action send_to_cpu() {
        std.egress_spec = CPU_PORT;
        meta.egress_chosen = true;
    }

    action drop() {
        meta.drop_reason = DROP_CONTROLLER;
    }

    table punt {
        key = {
            hdr.ethernet.ether_type : ternary @name("ether_type");
            std.ingress_port        : ternary @name("ingress_port");
            hdr.ipv6.dst_addr       : ternary @name("ipv6_dst");
        }
        actions = {
            send_to_cpu;
            drop;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 64;
    }

    apply {
        punt.apply();
    }
}

control FabricEgress(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t std) {
    counter(PORT_COUNT, CounterType.packets_and_bytes) port_tx;

    CongestionSignals() congestion;

    apply {
        congestion.apply(hdr, meta, std);
        port_tx.count((bit<32>) std.egress_port);
        if (std.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = std.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

#endif
