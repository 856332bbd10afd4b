/* Header formats, each tied to its standard, and the metadata both programs share. */
#ifndef __HEADERS_P4__
#define __HEADERS_P4__

#include "defines.p4"

/* Controller packet I/O (P4Runtime spec 16.1): prepended on the CPU port only. */
@controller_header("packet_in")
header packet_in_t {
    port_t  ingress_port;
    bit<7>  _pad;
}

@controller_header("packet_out")
header packet_out_t {
    port_t  egress_port;
    bit<7>  _pad;
}

/* IEEE 802.3 Ethernet II. */
header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/* IPv4, RFC 791 3.1 (options are not parsed: IHL > 5 stops the parser at L3). */
header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

/* IPv6, RFC 8200 3. Used for the outer header and for the inner one of IPv6-in-IPv6. */
header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

/* The fixed part common to every IPv6 Routing header, RFC 8200 4.4; parsed when the
 * Routing Type is not 4, so that the SID processing can apply RFC 8200's rule. */
header routing_t {
    bit<8> next_hdr;
    bit<8> hdr_ext_len;
    bit<8> routing_type;
    bit<8> segments_left;
}

/* Segment Routing Header, RFC 8754 2: the fixed 8 bytes ... */
header srh_t {
    bit<8>  next_hdr;
    bit<8>  hdr_ext_len;
    bit<8>  routing_type;
    bit<8>  segments_left;
    bit<8>  last_entry;
    bit<8>  flags;
    bit<16> tag;
}

/* ... followed by Segment List[0..Last Entry], Segment List[0] being the last segment. */
header srh_segment_t {
    ipv6_addr_t sid;
}

/* UDP, RFC 768. */
header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* TCP, RFC 9293 3.1: only what the 5-tuple hash needs is used. */
header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

/* InfiniBand Base Transport Header (IBTA vol. 1, 9.2), carried by RoCEv2 over UDP 4791. */
header bth_t {
    bit<8>  opcode;
    bit<1>  se;          /* solicited event */
    bit<1>  m;           /* migration request */
    bit<2>  pad_count;
    bit<4>  tver;        /* transport header version */
    bit<16> p_key;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dest_qp;
    bit<1>  ack_req;
    bit<7>  resv7;
    bit<24> psn;
}

struct headers_t {
    packet_out_t  packet_out;
    packet_in_t   packet_in;
    ethernet_t    ethernet;
    ipv4_t        ipv4;
    ipv6_t        ipv6;          /* outermost IPv6 */
    routing_t     routing;       /* a Routing header that is not an SRH */
    srh_t         srh;
    srh_segment_t[SRH_MAX_SEGMENTS] srh_segments;
    ipv6_t        inner_ipv6;    /* IPv6-in-IPv6 (next header 41) */
    ipv4_t        inner_ipv4;    /* IPv4-in-IPv6 (next header 4) */
    udp_t         udp;           /* of the innermost IP packet */
    tcp_t         tcp;
    bth_t         bth;
}

struct local_metadata_t {
    /* parser */
    bit<32>        ip6_left;        /* bytes the outer IPv6 Payload Length leaves after its SRH */
    bit<8>         srh_segments_to_parse;
    bit<8>         srh_tlv_len;
    /* SR-domain boundary: the host port's policy (metadata, not control locals: a local's initialiser
     * would cost every packet a table apply in bmv2) */
    bit<16>        first_usid;
    ipv6_addr_t    boundary_host;
    bit<32>        usid_block;      /* the fabric's uSID block (boundary and headend) */
    bool           allow_sr;
    /* drop accounting */
    drop_reason_t  drop_reason;
    /* headend */
    ipv6_addr_t    headend_src;
    bool           headend;         /* host_policy: RoCEv2 from this port is sprayed */
    bit<2>         hash_mode;
    bit<32>        dst_usids;
    bit<16>        spray_hash;
    bool           encapsulated;
    /* SRv6 endpoint */
    bit<3>         sid_behavior;
    bool           decapsulated;
    bool           egress_chosen;
    /* eecmp: addresses as 128 bits (IPv4 as ::ffff:a.b.c.d, RFC 4291 2.5.5.2), the L4 ports */
    bit<16>        l4_src_port;
    bit<16>        l4_dst_port;
    bit<128>       l3_src;
    bit<128>       l3_dst;
    bit<8>         l3_proto;
    bit<16>        pin_index;
    bit<16>        ecmp_hash;
    /* congestion signals: the thresholds (ingress, include/congestion.p4) and the trim decision */
    bit<19>        ecn_depth;
    bit<19>        trim_depth;
    bit<6>         trim_class;
    bool           trim;
    bool           ecn_off;         /* a host-facing egress port: no CE marked here (congestion.p4) */
}

#endif
