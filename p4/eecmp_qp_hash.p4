/* eecmp_qp_hash.p4: L3 ECMP whose hash can include the RoCEv2 BTH destination QP
 * (Meta's Enhanced-ECMP), with 5-tuple and path-pinning baselines (bmv2, v1model).
 *
 * IPv4 and IPv6 destinations share one 128-bit LPM table: IPv4 is matched as an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d, RFC 4291 2.5.5.2). Routes point at
 * next-hop groups of an action selector whose key is one hash computed into metadata;
 * the hash mode is set per destination by the controller. */

#include <core.p4>
#include <v1model.p4>

#include "include/common.p4"

#define MEMBER_COUNTER_SIZE 4096

control Ecmp(inout headers_t hdr,
             inout local_metadata_t meta,
             inout standard_metadata_t std) {
    counter(MEMBER_COUNTER_SIZE, CounterType.packets_and_bytes) member_packets;

    @max_group_size(512)
    action_selector(HashAlgorithm.identity, 32w4096, 32w16) ecmp_selector;

    action set_hash_mode(bit<2> mode) {
        meta.hash_mode = mode;
    }

    /* Path pinning (Meta's baseline): the member is the destination host's index
     * modulo the group size, whatever the flow. */
    action set_pin(bit<16> host_index) {
        meta.hash_mode = HASH_PIN;
        meta.pin_index = host_index;
    }

    table hash_policy {
        key = {
            meta.l3_dst : lpm @name("l3_dst");
        }
        actions = {
            set_hash_mode;
            set_pin;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 4096;
    }

    action set_next_hop(port_t port, mac_addr_t smac, mac_addr_t dmac, bit<16> member_index) {
        std.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        member_packets.count((bit<32>) member_index);
    }

    action drop() {
        meta.drop_reason = DROP_CONTROLLER;
    }

    table routes {
        key = {
            meta.l3_dst    : lpm @name("l3_dst");
            meta.ecmp_hash : selector @name("ecmp_hash");
        }
        actions = {
            set_next_hop;
            drop;
        }
        implementation = ecmp_selector;
        size = 4096;
    }

    apply {
        if (hdr.udp.isValid()) {
            meta.l4_src_port = hdr.udp.src_port;
            meta.l4_dst_port = hdr.udp.dst_port;
        } else if (hdr.tcp.isValid()) {
            meta.l4_src_port = hdr.tcp.src_port;
            meta.l4_dst_port = hdr.tcp.dst_port;
        }
        if (hdr.ipv4.isValid()) {
            meta.l3_src = 80w0 ++ 16w0xffff ++ hdr.ipv4.src_addr;
            meta.l3_dst = 80w0 ++ 16w0xffff ++ hdr.ipv4.dst_addr;
            meta.l3_proto = hdr.ipv4.protocol;
        } else if (hdr.ipv6.isValid()) {
            meta.l3_src = hdr.ipv6.src_addr;
            meta.l3_dst = hdr.ipv6.dst_addr;
            meta.l3_proto = hdr.ipv6.next_hdr;
        } else {
            meta.drop_reason = DROP_NOT_IP;
            return;
        }

        /* TTL (RFC 791) / hop limit (RFC 8200) */
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.ttl <= 1) {
                meta.drop_reason = DROP_HOP_LIMIT;
                return;
            }
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        } else {
            if (hdr.ipv6.hop_limit <= 1) {
                meta.drop_reason = DROP_HOP_LIMIT;
                return;
            }
            hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
        }

        hash_policy.apply();
        if (meta.hash_mode == HASH_PIN) {
            meta.ecmp_hash = meta.pin_index;
        } else if (meta.hash_mode == HASH_QP || meta.hash_mode == HASH_PACKET) {
            /* E-ECMP: the destination QP separates the elephant flows that share one
             * 5-tuple (PACKET mode is QP here: eecmp does not spray within a QP). */
            hash(meta.ecmp_hash, HashAlgorithm.crc32, 16w0,
                 { meta.l3_src, meta.l3_dst, meta.l3_proto,
                   meta.l4_src_port, meta.l4_dst_port, hdr.bth.dest_qp },
                 32w65536);
        } else {
            hash(meta.ecmp_hash, HashAlgorithm.crc32, 16w0,
                 { meta.l3_src, meta.l3_dst, meta.l3_proto,
                   meta.l4_src_port, meta.l4_dst_port },
                 32w65536);
        }
        if (!routes.apply().hit) {
            meta.drop_reason = DROP_NO_ROUTE;
        }
    }
}

control IngressPipe(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t std) {
    counter(DROP_REASON_COUNT, CounterType.packets) drop_reasons;  /* port_rx: include/congestion.p4 */

    ParserErrors() parser_errors;
    CpuPunt() cpu;
    Ecmp() ecmp;
    TrimAdmission() congestion;

    apply {
        if (hdr.packet_out.isValid()) {
            port_rx.count((bit<32>) std.ingress_port);
            std.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            return;
        }
        parser_errors.apply(hdr, meta, std);
        if (meta.drop_reason == DROP_NONE) {
            cpu.apply(hdr, meta, std);
        }
        if (meta.drop_reason == DROP_NONE && !meta.egress_chosen) {
            ecmp.apply(hdr, meta, std);
        }
        /* Each packet is counted in port_rx once: here, or by congestion's action. */
        if (meta.drop_reason == DROP_NONE && std.egress_spec != CPU_PORT) {
            congestion.apply(hdr, meta, std);  /* trim or not, which queue, port_rx (include/congestion.p4) */
        } else {
            port_rx.count((bit<32>) std.ingress_port);
        }
        if (meta.drop_reason != DROP_NONE) {
            drop_reasons.count((bit<32>) meta.drop_reason);
            mark_to_drop(std);
        }
    }
}

V1Switch(FabricParser(),
         FabricVerifyChecksum(),
         IngressPipe(),
         FabricEgress(),
         FabricComputeChecksum(),
         FabricDeparser()) main;
