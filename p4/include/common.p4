/* Controls both programs use: parser-error accounting, controller packet I/O, egress. */
#ifndef __COMMON_P4__
#define __COMMON_P4__

#include "parser.p4"
#include "congestion.p4"

/* Turns a parser error into a drop reason, naming the header the packet ended in. Applied only when
 * there is one (std.parser_error != NoError or std.checksum_error), so a good packet pays one condition. */
control ParserErrors(in headers_t hdr,
                     inout local_metadata_t meta,
                     in standard_metadata_t std) {
    apply {
        if (std.checksum_error == 1) {
            meta.drop_reason = DROP_IPV4_CHECKSUM;
        } else if (std.parser_error == error.PacketTooShort) {
            /* Where the packet ended, from what the parser got whole: UDP to 4791 but no BTH; or a
             * Routing header after the outer IPv6 header that is neither whole (a Routing header of
             * another type, extracted, ends the parse) nor an SRH with its last segment. */
            if (hdr.udp.isValid() && !hdr.bth.isValid() && hdr.udp.dst_port == ROCE_V2_UDP_PORT) {
                meta.drop_reason = DROP_BTH_TRUNCATED;
            } else if (hdr.ipv6.isValid() && hdr.ipv6.next_hdr == PROTO_ROUTING && !hdr.routing.isValid()
                       && !((hdr.srh.last_entry == 0 && hdr.srh_segments[0].isValid())
                            || (hdr.srh.last_entry == 1 && hdr.srh_segments[1].isValid())
                            || (hdr.srh.last_entry == 2 && hdr.srh_segments[2].isValid())
                            || (hdr.srh.last_entry == 3 && hdr.srh_segments[3].isValid()))) {
                meta.drop_reason = DROP_SRH_TRUNCATED;
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
        } else if (std.parser_error != error.NoError) {
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

    /* No `return` anywhere on this path: p4c turns each into a flag tested before every later statement
     * (a condition per statement in bmv2), which is what a packet pays for, not the statements. */
    apply {
        if (std.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = std.ingress_port;
            hdr.packet_in._pad = 0;
            port_tx.count((bit<32>) std.egress_port);
        } else {
            /* one step: the counter, and while trimming is on what this queue holds now */
            if (meta.trim_depth != 0) {
                port_tx.count((bit<32>) std.egress_port);
                QUEUE_SEEN(std);
            } else {
                port_tx.count((bit<32>) std.egress_port);
            }
            congestion.apply(hdr, meta, std);
        }
    }
}

#endif
