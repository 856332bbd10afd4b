/* The one parser both programs use: it reaches the RoCEv2 BTH of the inner packet
 * through IPv6-in-IPv6 and an SRH; plus checksum and deparser controls. */
#ifndef __PARSER_P4__
#define __PARSER_P4__

#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

/* Parser errors of our own (in addition to core.p4's PacketTooShort etc.). */
error {
    SrhTooDeep,         /* Last Entry >= SRH_MAX_SEGMENTS */
    SrhLength,          /* Hdr Ext Len < 2 * (Last Entry + 1), RFC 8754 4.3.1.1 */
    SrhSegmentsLeft,    /* Segments Left > Last Entry + 1, RFC 8754 4.3.1.1 */
    Ipv4IhlInvalid,     /* outer IHL != 5 (options unsupported) or inner IHL < 5, RFC 791 3.1 */
    Ipv6Version,        /* Version != 6 in a header parsed as IPv6, RFC 8200 3 */
    Ipv6Length,         /* Payload Length runs past the frame (or past the outer packet), RFC 8200 3 */
    SrhPastEnd          /* (Hdr Ext Len + 1) * 8 runs past the IPv6 payload, RFC 8754 2 */
}

/* Every check costs each packet of every port in bmv2 (a parser assignment is an interpreted
 * expression): the parser keeps only what names a malformed header, and no bookkeeping a good packet
 * does not need. The header it stopped in is read back from the headers' validity when there is an
 * error (ParserErrors), not tracked state by state; lengths are checked against the frame and the
 * outer Payload Length directly. */
parser FabricParser(packet_in packet,
                    out headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    /* A packet-out is sent as it is (IngressPipe ignores its parser errors): the length checks
     * below, made against the whole frame, are 2 bytes looser for it. */
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* IPv4 options are not supported: a router here rewrites the TTL and must
         * recompute the checksum over the header it parsed (IHL = 5). */
        verify(hdr.ipv4.ihl == 5, error.Ipv4IhlInvalid);
        /* Non-first fragments carry no L4 header to hash on. */
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, PROTO_UDP): parse_udp;
            (0, PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        /* RFC 8200 3: a header that says it is not version 6, or whose Payload Length
         * claims more bytes than the frame holds, is malformed: never forwarded (a host
         * would read past the packet, a switch would trim or pad it). Frames may be
         * longer (Ethernet padding), never shorter. */
        verify(hdr.ipv6.version == 6, error.Ipv6Version);
        verify((bit<32>) hdr.ipv6.payload_len + (ETHERNET_BYTES + (bit<32>) IPV6_HEADER_BYTES) <= std.packet_length,
               error.Ipv6Length);
        transition select(hdr.ipv6.next_hdr) {
            PROTO_ROUTING: parse_routing;
            PROTO_IPV6: parse_inner_ipv6;
            PROTO_IPV4: parse_inner_ipv4;
            PROTO_UDP: parse_udp;
            PROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    /* RFC 8200 4.4: byte 2 of every Routing header is its Routing Type. */
    state parse_routing {
        transition select(packet.lookahead<bit<24>>()[7:0]) {
            ROUTING_TYPE_SRH: parse_srh;
            default: parse_other_routing;
        }
    }

    state parse_other_routing {
        packet.extract(hdr.routing);
        transition accept;
    }

    /* RFC 8754 2 and 4.3.1.1: an SRH whose lengths contradict each other is malformed. */
    state parse_srh {
        packet.extract(hdr.srh);
        /* RFC 8754 2: the SRH is (Hdr Ext Len + 1) * 8 bytes; one that runs past the
         * packet is dropped here, where it is first parsed, not hops later. */
        bit<32> srh_bytes = ((bit<32>) hdr.srh.hdr_ext_len + 1) << 3;
        verify(srh_bytes <= (bit<32>) hdr.ipv6.payload_len, error.SrhPastEnd);
        /* what the outer Payload Length leaves after the SRH, for an inner IPv6 header */
        meta.ip6_left = (bit<32>) hdr.ipv6.payload_len - srh_bytes;
        verify(hdr.srh.last_entry < SRH_MAX_SEGMENTS, error.SrhTooDeep);
        verify(hdr.srh.hdr_ext_len >= ((hdr.srh.last_entry + 1) << 1), error.SrhLength);
        verify(hdr.srh.segments_left <= hdr.srh.last_entry + 1, error.SrhSegmentsLeft);
        meta.srh_segments_to_parse = hdr.srh.last_entry + 1;
        meta.srh_tlv_len = hdr.srh.hdr_ext_len - ((hdr.srh.last_entry + 1) << 1);
        transition parse_srh_segment;
    }

    state parse_srh_segment {
        packet.extract(hdr.srh_segments.next);
        meta.srh_segments_to_parse = meta.srh_segments_to_parse - 1;
        transition select(meta.srh_segments_to_parse) {
            0: parse_srh_next;
            default: parse_srh_segment;
        }
    }

    /* SRH TLVs (Hdr Ext Len beyond the segment list) are not parsed: such a packet can
     * transit and be processed by End/uN, but the inner packet is not reached. */
    state parse_srh_next {
        transition select(meta.srh_tlv_len, hdr.srh.next_hdr) {
            (0, PROTO_IPV6): parse_inner_ipv6_after_srh;
            (0, PROTO_IPV4): parse_inner_ipv4;
            (0, PROTO_UDP): parse_udp;
            (0, PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    /* RFC 8200 3 for the inner header too (RFC 2473 3.1: the tunnel payload is a whole IPv6
     * packet), measured against what the outer header leaves for it: its Payload Length here, */
    state parse_inner_ipv6 {
        packet.extract(hdr.inner_ipv6);
        verify(hdr.inner_ipv6.version == 6, error.Ipv6Version);
        verify((bit<32>) hdr.inner_ipv6.payload_len + (bit<32>) IPV6_HEADER_BYTES <= (bit<32>) hdr.ipv6.payload_len,
               error.Ipv6Length);
        transition select(hdr.inner_ipv6.next_hdr) {
            PROTO_UDP: parse_udp;
            PROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    /* ... or that less the SRH. */
    state parse_inner_ipv6_after_srh {
        packet.extract(hdr.inner_ipv6);
        verify(hdr.inner_ipv6.version == 6, error.Ipv6Version);
        verify((bit<32>) hdr.inner_ipv6.payload_len + (bit<32>) IPV6_HEADER_BYTES <= meta.ip6_left,
               error.Ipv6Length);
        transition select(hdr.inner_ipv6.next_hdr) {
            PROTO_UDP: parse_udp;
            PROTO_TCP: parse_tcp;
            default: accept;
        }
    }

    state parse_inner_ipv4 {
        packet.extract(hdr.inner_ipv4);
        verify(hdr.inner_ipv4.ihl >= 5, error.Ipv4IhlInvalid);
        transition select(hdr.inner_ipv4.ihl, hdr.inner_ipv4.frag_offset, hdr.inner_ipv4.protocol) {
            (5, 0, PROTO_UDP): parse_udp;
            (5, 0, PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            ROCE_V2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }

    /* RoCEv2: a UDP 4791 datagram must hold a whole 12-byte BTH. */
    state parse_bth {
        packet.extract(hdr.bth);
        transition accept;
    }
}

control FabricVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control FabricComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control FabricDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.routing);
        packet.emit(hdr.srh);
        packet.emit(hdr.srh_segments);
        packet.emit(hdr.inner_ipv6);
        packet.emit(hdr.inner_ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.bth);
    }
}

#endif
