/* srv6_spray.p4: SRv6 source-routed spraying for multi-plane Clos fabrics (bmv2, v1model).
 *
 * One program for every switch role; table entries choose the behaviour:
 *  - headend at the source leaf: RoCEv2 from a host port is encapsulated (H.Encaps,
 *    RFC 8986 5.1) towards a uSID carrier chosen per packet, per QP or per flow from a
 *    spray set (an action-selector group whose members are paths);
 *  - uN (RFC 9800 NEXT-CSID, F3216) and End (RFC 8986 4.1) on the way;
 *  - decapsulation at the destination leaf: End.DX6 (RFC 8986 4.5) to a host port, or
 *    End.DT6 (4.6) followed by a lookup of the inner destination;
 *  - plain IPv6 LPM forwarding for everything else;
 *  - at host ports, the SR-domain boundary (RFC 8754 5.1, RFC 8986 8) and, where the
 *    controller allows it, hosts as SRv6 sources (endpoint mode, include/sr_boundary.p4);
 *  - in egress, ECN CE marking and packet trimming (include/congestion.p4).
 * Malformed packets are dropped and counted by reason (drop_reasons). */

#include <core.p4>
#include <v1model.p4>

#include "include/common.p4"
#include "include/sr_boundary.p4"

const bit<3> SID_NONE = 0;
const bit<3> SID_UN   = 1;
const bit<3> SID_END  = 2;
const bit<3> SID_DX6  = 3;
const bit<3> SID_DT6  = 4;

#define PATH_COUNTER_SIZE 4096

/* Headend (RFC 8986 5.1 H.Encaps): picks a path for RoCEv2 from hosts and pushes the
 * outer IPv6 header (and an SRH when the path needs more than one carrier). The inner
 * packet is left untouched, so its RoCE ICRC stays valid. */
control Headend(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t std) {
    counter(PATH_COUNTER_SIZE, CounterType.packets_and_bytes) path_packets;

    /* Members are paths; the selector key is the hash computed below (identity), so
     * the member is spray_hash % group size. */
    @max_group_size(512)
    action_selector(HashAlgorithm.identity, 32w4096, 32w16) spray_selector;

    /* Per destination prefix: the hash mode, and the two uSIDs that end every carrier
     * towards it (the destination leaf's uN, then its decap uSID), given whole. */
    action set_spray(bit<2> mode, bit<32> dst_usids) {
        meta.hash_mode = mode;
        meta.dst_usids = dst_usids;
    }

    /* The same two uSIDs read from the destination address itself, so one entry serves
     * every leaf of a plane (docs/sid-plan.md): host addresses are <base>:<plane>:<leaf>::/64
     * and leaf i's uN is the plane's first leaf uN + i (RFC 9800 6: the locator plan is the
     * operator's; the entry carries it), its End.DT6 uSID the same on every leaf. */
    action derive_spray(bit<2> mode, bit<16> t0_usid_base, bit<16> decap_usid) {
        meta.hash_mode = mode;
        meta.dst_usids = (t0_usid_base + hdr.ipv6.dst_addr[95:80]) ++ decap_usid;
    }

    /* The destination is behind this leaf: not encapsulated, its host route delivers it. */
    action local_leaf() {
    }

    /* A destination leaf with no path left in this plane (RFC 8986 5.1 has no path to push). */
    action no_path() {
        meta.drop_reason = DROP_NO_PATH;
    }

    table spray_dest {
        key = {
            hdr.ipv6.dst_addr : lpm @name("dst_addr");
        }
        actions = {
            set_spray;
            derive_spray;
            local_leaf;
            no_path;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 4096;
    }

    /* Push the outer IPv6 header; next_hdr says what follows it (41, or 43 with an SRH). */
    action push_outer_ipv6(ipv6_addr_t dst, bit<8> next_hdr, bit<16> srh_bytes) {
        /* The outer header starts as a copy of the inner one: Version 6 (the parser checked it) and the
         * Traffic Class stay (RFC 6040 4.1 normal mode copies ECN; the DSCP is the packet's own). */
        hdr.inner_ipv6 = hdr.ipv6;
        /* RFC 6437: the flow label carries the path entropy for the underlay. */
        hdr.ipv6.flow_label = (bit<20>) meta.spray_hash;
        hdr.ipv6.payload_len = hdr.inner_ipv6.payload_len + IPV6_HEADER_BYTES + srh_bytes;
        hdr.ipv6.next_hdr = next_hdr;
        hdr.ipv6.hop_limit = ENCAP_HOP_LIMIT;
        hdr.ipv6.src_addr = meta.headend_src;
        hdr.ipv6.dst_addr = dst;
        meta.encapsulated = true;
    }

    /* The shared spray set of a source leaf: one member per uplink. The carrier is
     * block | spine uSID | destination leaf uN | destination decap uSID | 0 ... */
    action via_spine(bit<16> spine_usid, bit<16> path_index) {
        push_outer_ipv6(meta.usid_block ++ spine_usid ++ meta.dst_usids ++ 48w0, PROTO_IPV6, 0);
        path_packets.count((bit<32>) path_index);
    }

    /* A path given whole as one uSID carrier (or one classic SID): no SRH. */
    action encap_carrier(ipv6_addr_t carrier, bit<16> path_index) {
        push_outer_ipv6(carrier, PROTO_IPV6, 0);
        path_packets.count((bit<32>) path_index);
    }

    /* A path of two carriers: RFC 8754 SRH with the full segment list (RFC 8986 5.1:
     * Segment List[0] is the last, Segments Left = Last Entry, DA = the first). */
    action encap_srh2(ipv6_addr_t carrier0, ipv6_addr_t carrier1, bit<16> path_index) {
        push_outer_ipv6(carrier0, PROTO_ROUTING, SRH_FIXED_BYTES + 32);
        hdr.srh.setValid();
        hdr.srh.next_hdr = PROTO_IPV6;
        hdr.srh.hdr_ext_len = 4;
        hdr.srh.routing_type = ROUTING_TYPE_SRH;
        hdr.srh.segments_left = 1;
        hdr.srh.last_entry = 1;
        hdr.srh.flags = 0;
        hdr.srh.tag = 0;
        hdr.srh_segments[0].setValid();
        hdr.srh_segments[0].sid = carrier1;
        hdr.srh_segments[1].setValid();
        hdr.srh_segments[1].sid = carrier0;
        path_packets.count((bit<32>) path_index);
    }

    action encap_srh3(ipv6_addr_t carrier0, ipv6_addr_t carrier1, ipv6_addr_t carrier2,
                      bit<16> path_index) {
        push_outer_ipv6(carrier0, PROTO_ROUTING, SRH_FIXED_BYTES + 48);
        hdr.srh.setValid();
        hdr.srh.next_hdr = PROTO_IPV6;
        hdr.srh.hdr_ext_len = 6;
        hdr.srh.routing_type = ROUTING_TYPE_SRH;
        hdr.srh.segments_left = 2;
        hdr.srh.last_entry = 2;
        hdr.srh.flags = 0;
        hdr.srh.tag = 0;
        hdr.srh_segments[0].setValid();
        hdr.srh_segments[0].sid = carrier2;
        hdr.srh_segments[1].setValid();
        hdr.srh_segments[1].sid = carrier1;
        hdr.srh_segments[2].setValid();
        hdr.srh_segments[2].sid = carrier0;
        path_packets.count((bit<32>) path_index);
    }

    /* Deterministic, collision-free assignment where flow sizes are known: a
     * (destination, QP) pinned to one path, ahead of the hash. */
    table pinned_path {
        key = {
            hdr.ipv6.dst_addr : exact @name("dst_addr");
            hdr.bth.dest_qp   : exact @name("dest_qp");
        }
        actions = {
            via_spine;
            encap_carrier;
            encap_srh2;
            encap_srh3;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 4096;
    }

    table spray_paths {
        key = {
            hdr.ipv6.dst_addr : lpm @name("dst_addr");
            meta.spray_hash   : selector @name("spray_hash");
        }
        actions = {
            via_spine;
            encap_carrier;
            encap_srh2;
            encap_srh3;
        }
        implementation = spray_selector;
        size = 4096;
    }

    /* The caller applies this to RoCEv2 over plain IPv6 (a BTH, UDP right after the IPv6 header, no
     * inner IP header) from a host port whose host_policy entry turns the headend on (meta.headend, with
     * its source address and block) only. Nested ifs, no `return`: in bmv2 each `return` costs a
     * condition before every later statement. */
    apply {
        switch (spray_dest.apply().action_run) {
            set_spray:
            derive_spray: {
                if (meta.hash_mode == HASH_PACKET) {
                    hash(meta.spray_hash, HashAlgorithm.crc32, 16w0,
                         { hdr.ipv6.src_addr, hdr.ipv6.dst_addr, hdr.ipv6.next_hdr,
                           hdr.udp.src_port, hdr.udp.dst_port, hdr.bth.dest_qp, hdr.bth.psn },
                         32w65536);
                } else if (meta.hash_mode == HASH_QP) {
                    hash(meta.spray_hash, HashAlgorithm.crc32, 16w0,
                         { hdr.ipv6.src_addr, hdr.ipv6.dst_addr, hdr.ipv6.next_hdr,
                           hdr.udp.src_port, hdr.udp.dst_port, hdr.bth.dest_qp },
                         32w65536);
                } else {
                    hash(meta.spray_hash, HashAlgorithm.crc32, 16w0,
                         { hdr.ipv6.src_addr, hdr.ipv6.dst_addr, hdr.ipv6.next_hdr,
                           hdr.udp.src_port, hdr.udp.dst_port },
                         32w65536);
                }
                if (!pinned_path.apply().hit) {
                    if (!spray_paths.apply().hit) {
                        /* Known destination, but no path left in this plane. */
                        meta.drop_reason = DROP_NO_PATH;
                    }
                }
            }
            /* unknown, local or unreachable destination: not encapsulated */
        }
    }
}

/* SRv6 endpoint behaviours for the local SIDs of this switch (the "My SID" table). */
control Endpoint(inout headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t std) {
    /* RFC 9800 4.1 (NEXT-CSID, LBL 32, NF 16): shift the uSIDs after ours left by 16 bits, zero-fill,
     * keep the block; done here, in the lookup's own action, because it is the transit hop's whole
     * work. With our uSID the last of the carrier (the shifted address is block | 0 ...), apply()
     * takes the next SRH segment instead, and a packet dropped after it is not sent. */
    action usid_un() {
        meta.sid_behavior = SID_UN;
        hdr.ipv6.dst_addr = hdr.ipv6.dst_addr[127:96] ++ hdr.ipv6.dst_addr[79:0] ++ 16w0;
    }

    /* uN and the next hop in one lookup, the uN transit's whole work (docs/pipeline.md, per-role cost):
     * installed per next uSID this switch forwards to (block | our uSID | next uSID as /64, next uSID
     * not 0), with that uSID's route. The shift as usid_un, the next hop as routes_v6's set_next_hop,
     * the hop limit less one (0 stays 0: apply() drops it as HOP_LIMIT, as Routing does a packet it
     * would take to 0). */
    action usid_un_next_hop(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        meta.sid_behavior = SID_UN;
        hdr.ipv6.dst_addr = hdr.ipv6.dst_addr[127:96] ++ hdr.ipv6.dst_addr[79:0] ++ 16w0;
        std.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit == 0 ? 8w0 : hdr.ipv6.hop_limit - 1;
        meta.egress_chosen = true;
    }

    action end() {
        meta.sid_behavior = SID_END;
    }

    action end_dx6(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        meta.sid_behavior = SID_DX6;
        std.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
    }

    action end_dt6() {
        meta.sid_behavior = SID_DT6;
    }

    /* uN: block+uSID as /48, and with the next hop per next uSID as /64; End: a classic SID as /128;
     * decap uSIDs as /64 (block | leaf uN | decap uSID), so the shift and the decap are one lookup. */
    table my_sid {
        key = {
            hdr.ipv6.dst_addr : lpm @name("dst_addr");
        }
        actions = {
            usid_un;
            usid_un_next_hop;
            end;
            end_dx6;
            end_dt6;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 1024;
    }

    /* RFC 8754 4.3.1.1 / RFC 8986 4.1: Segments Left - 1, and the next segment
     * becomes the destination. Segment List[0] is the last segment. */
    action next_segment(ipv6_addr_t sid) {
        hdr.srh.segments_left = hdr.srh.segments_left - 1;
        hdr.ipv6.dst_addr = sid;
    }

    /* The caller applies this to IPv6 packets only. A uN transit hop pays the lookup (whose action
     * shifts the carrier) and one condition. */
    apply {
        switch (my_sid.apply().action_run) {
            usid_un:
            end: {
                /* usid_un has shifted already: dst_addr[95:16] is what followed our uSID. */
                if (hdr.routing.isValid() || meta.sid_behavior == SID_END || hdr.ipv6.dst_addr[95:16] == 0) {
                    if (hdr.routing.isValid() && hdr.routing.segments_left != 0) {
                        /* RFC 8200 4.4: a Routing header of an unknown type with Segments Left != 0
                         * must not be processed past. */
                        meta.drop_reason = DROP_ROUTING_TYPE;
                    } else if (meta.sid_behavior == SID_UN && hdr.ipv6.dst_addr[95:16] != 0) {
                        /* uN with uSIDs left, behind a Routing header with Segments Left 0 */
                    } else if (!hdr.srh.isValid() || hdr.srh.segments_left == 0) {
                        meta.drop_reason = DROP_SID_NO_NEXT;
                    } else if (hdr.srh.segments_left == 1) {
                        next_segment(hdr.srh_segments[0].sid);
                    } else if (hdr.srh.segments_left == 2) {
                        next_segment(hdr.srh_segments[1].sid);
                    } else if (hdr.srh.segments_left == 3) {
                        next_segment(hdr.srh_segments[2].sid);
                    } else {
                        next_segment(hdr.srh_segments[3].sid);
                    }
                }
            }
            usid_un_next_hop: {
                /* uSIDs left (the entry's next uSID): what Endpoint and Routing check of a uN transit. */
                if (hdr.routing.isValid() && hdr.routing.segments_left != 0) {
                    meta.drop_reason = DROP_ROUTING_TYPE;
                } else if (hdr.ipv6.hop_limit == 0) {
                    meta.drop_reason = DROP_HOP_LIMIT;
                }
            }
            end_dx6:
            end_dt6: {
                /* End.DX6 / End.DT6 (RFC 8986 4.5, 4.6): only at the last segment and only for
                 * IPv6-in-IPv6; remove the outer header and its SRH. */
                if (hdr.routing.isValid() && hdr.routing.segments_left != 0) {
                    meta.drop_reason = DROP_ROUTING_TYPE;
                } else if (!hdr.inner_ipv6.isValid()
                           || (hdr.srh.isValid() && hdr.srh.segments_left != 0)) {
                    meta.drop_reason = DROP_DECAP_INVALID;
                } else if (hdr.ipv6.traffic_class[1:0] == ECN_CE
                           && hdr.inner_ipv6.traffic_class[1:0] == ECN_NOT_ECT) {
                    /* RFC 6040 4.2 (normal mode): CE over Not-ECT is dropped. */
                    meta.drop_reason = DROP_ECN_NOT_ECT;
                } else {
                    /* RFC 6040 4.2: congestion marked on the outer header must reach the receiving
                     * NIC (DCQCN reacts to CE); the ICRC masks the Traffic Class, so the RoCE packet
                     * stays valid. */
                    bit<2> outer_ecn = hdr.ipv6.traffic_class[1:0];
                    hdr.ipv6 = hdr.inner_ipv6;
                    if (outer_ecn == ECN_CE) {
                        hdr.ipv6.traffic_class[1:0] = ECN_CE;
                    }
                    hdr.inner_ipv6.setInvalid();
                    hdr.routing.setInvalid();
                    hdr.srh.setInvalid();
                    hdr.srh_segments[0].setInvalid();
                    hdr.srh_segments[1].setInvalid();
                    hdr.srh_segments[2].setInvalid();
                    hdr.srh_segments[3].setInvalid();
                    meta.decapsulated = true;
                    meta.egress_chosen = meta.sid_behavior == SID_DX6;
                }
            }
        }
    }
}

/* IPv6 LPM forwarding, hop limit handling (RFC 8200 3). */
control Routing(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t std) {
    /* Also the hop limit (RFC 8200 3), here rather than in a step of its own (one table apply less per
     * packet): apply() has dropped a packet it would take to 0. A packet this switch encapsulated or
     * decapsulated keeps it: the outer header is new (64), the inner one is not forwarded IP-wise yet. */
    action set_next_hop(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        std.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv6.hop_limit = meta.encapsulated || meta.decapsulated ? hdr.ipv6.hop_limit : hdr.ipv6.hop_limit - 1;
    }

    /* Installed on the uSID block: a uSID of the block that no route knows. */
    action drop_usid_unknown() {
        meta.drop_reason = DROP_USID_NO_MATCH;
    }

    action drop() {
        meta.drop_reason = DROP_CONTROLLER;
    }

    action no_route() {
        meta.drop_reason = DROP_NO_ROUTE;
    }

    table routes_v6 {
        key = {
            hdr.ipv6.dst_addr : lpm @name("dst_addr");
        }
        actions = {
            set_next_hop;
            drop_usid_unknown;
            drop;
            @defaultonly no_route;
        }
        const default_action = no_route();
        size = 4096;
    }

    /* The caller applies this to IPv6 packets not yet dropped whose egress is not chosen. */
    apply {
        if (!meta.encapsulated && !meta.decapsulated && hdr.ipv6.hop_limit <= 1) {
            meta.drop_reason = DROP_HOP_LIMIT;
        } else {
            routes_v6.apply();
        }
    }
}

control IngressPipe(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t std) {
    counter(DROP_REASON_COUNT, CounterType.packets) drop_reasons;  /* port_rx: include/congestion.p4 */

    ParserErrors() parser_errors;
    CpuPunt() cpu;
    SrBoundary() boundary;
    Headend() headend;
    Endpoint() endpoint;
    Routing() routing;
    TrimAdmission() congestion;

    /* Each role pays for its own work only (docs/pipeline.md, per-role cost): a fabric port's packet
     * misses host_policy and goes on to my_sid and routes_v6; a host port's goes through the
     * boundary and the headend (one host_policy lookup gives both what they need). No `return`: in bmv2 p4c makes each one a flag tested before
     * every later statement. */
    apply {
        if (hdr.packet_out.isValid()) {
            /* From the controller: out of the named port, untouched. */
            port_rx.count((bit<32>) std.ingress_port);
            std.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            if (std.parser_error != error.NoError || std.checksum_error == 1) {
                parser_errors.apply(hdr, meta, std);
            } else if (!hdr.bth.isValid()) {
                /* RoCEv2 (a BTH parsed) is never the controller's (its punts are link probes and
                 * hosts' Neighbor Advertisements), so data packets skip the punt lookup. */
                cpu.apply(hdr, meta, std);
            }
            if (meta.drop_reason == DROP_NONE && !meta.egress_chosen) {
                if (hdr.ipv6.isValid()) {
                    boundary.apply(hdr, meta, std);  /* host ports only: a miss is a fabric port */
                    if (meta.headend && meta.drop_reason == DROP_NONE && hdr.bth.isValid()
                            && !hdr.inner_ipv6.isValid() && hdr.ipv6.next_hdr == PROTO_UDP) {
                        headend.apply(hdr, meta, std);
                    }
                    if (meta.drop_reason == DROP_NONE && !meta.encapsulated) {
                        endpoint.apply(hdr, meta, std);
                    }
                    if (meta.drop_reason == DROP_NONE && !meta.egress_chosen) {
                        routing.apply(hdr, meta, std);
                    }
                } else {
                    meta.drop_reason = hdr.ipv4.isValid() ? DROP_NO_ROUTE : DROP_NOT_IP;
                }
            }
            /* Each packet is counted in port_rx once: here, or by congestion's action. */
            if (meta.drop_reason != DROP_NONE) {
                port_rx.count((bit<32>) std.ingress_port);
                drop_reasons.count((bit<32>) meta.drop_reason);
                mark_to_drop(std);
            } else if (std.egress_spec != CPU_PORT) {
                congestion.apply(hdr, meta, std);  /* trim or not, which queue, port_rx (include/congestion.p4) */
            } else {
                port_rx.count((bit<32>) std.ingress_port);
            }
        }
    }
}

V1Switch(FabricParser(),
         FabricVerifyChecksum(),
         IngressPipe(),
         FabricEgress(),
         FabricComputeChecksum(),
         FabricDeparser()) main;
