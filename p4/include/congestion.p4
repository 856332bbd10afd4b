/* Congestion signals at the egress queue: ECN CE marking and packet trimming. */
#ifndef __CONGESTION_P4__
#define __CONGESTION_P4__

#include "parser.p4"

/* Per egress port and queue (index port << 3 | priority): the packets in that queue as egress last saw
 * them (deq_qdepth: what stays queued behind the packet leaving), plus the packets ingress admitted
 * to it since. Written by both pipelines (bmv2 makes each pipeline's register accesses atomic). */
register<qdepth_t>(QUEUE_INDEX_COUNT) queue_depth;

/* Packets and bytes received per ingress port (both programs' IngressPipe.port_rx). Declared here, outside
 * the ingress control, so that TrimAdmission's one action counts a forwarded packet (one table apply per
 * packet less: docs/pipeline.md, per-role cost); IngressPipe counts the packets that do not get there. */
@name("IngressPipe.port_rx")
counter(PORT_COUNT, CounterType.packets_and_bytes) port_rx;

/* Applied in ingress once the egress port is chosen: UEC / MRC trimming is decided here, before the
 * packet joins the congested queue, as a switch decides buffer admission. Thresholds come from the
 * controller (the default entry of `thresholds`; 0 turns a signal off), and per egress port an entry
 * set_host_port_thresholds where the plan turns ECN marking off on a host-facing port (MRC: CE is a
 * load-balancing signal of the fabric's links, the last hop marks none and incast is left to trimming):
 *  - while trimming is on, a packet whose (outermost) DSCP is trim_dscp goes to TRIM_PRIORITY, the
 *    queue served first: headers trimmed at an earlier hop, and the NACKs, ACKs and CNPs an endpoint
 *    marks with that class, so they overtake the congested traffic;
 *  - queue 0's depth (queue_depth) >= trim_qdepth, RoCEv2 only, not an ACK or CNP: the packet is
 *    trimmed (meta.trim, the rewrite happens in egress) and goes to TRIM_PRIORITY; otherwise it joins
 *    queue 0 and the depth grows by one.
 * The packet is counted in port_rx here too: the thresholds, the count and the admission are one action,
 * so one table apply per packet. */
control TrimAdmission(in headers_t hdr,
                      inout local_metadata_t meta,
                      inout standard_metadata_t std) {
    /* A packet of the trim class keeps its depth (written back unchanged); a RoCEv2 packet that is not
     * an ACK or CNP meeting a queue at trim_qdepth is trimmed; anything else joins queue 0, whose depth
     * grows by one. With trimming off (trim_qdepth 0) nothing is trimmed, the priority stays 0 and the
     * depth is written back as read (bmv2 holds the register's lock from the read to the write). */
    action set_thresholds(qdepth_t ecn_qdepth, qdepth_t trim_qdepth, bit<6> trim_dscp) {
        port_rx.count((bit<32>) std.ingress_port);
        meta.ecn_depth = ecn_qdepth;
        meta.trim_depth = trim_qdepth;
        meta.trim_class = trim_dscp;
        /* Only IP packets get here (both programs drop the others first). */
        bit<6> dscp = hdr.ipv6.isValid() ? hdr.ipv6.traffic_class[7:2] : hdr.ipv4.dscp;
        bit<32> queue = (bit<32>) std.egress_spec << 3;
        qdepth_t depth;
        queue_depth.read(depth, queue);
        bool on = trim_qdepth != 0;
        bool in_class = on && dscp == trim_dscp;
        bool cut = on && !in_class && depth >= trim_qdepth && hdr.bth.isValid() && hdr.udp.isValid()
                   && hdr.bth.opcode != BTH_OPCODE_RC_ACKNOWLEDGE && hdr.bth.opcode != BTH_OPCODE_CNP;
        meta.trim = cut;
        std.priority = in_class || cut ? TRIM_PRIORITY : 3w0;
        queue_depth.write(queue, !on || in_class || cut ? depth : depth + 1);
    }

    /* A host-facing port with ECN marking off: trimming as everywhere, no CE at all on this port, a
     * trimmed header included (CongestionSignals reads meta.ecn_off). */
    action set_host_port_thresholds(qdepth_t trim_qdepth, bit<6> trim_dscp) {
        set_thresholds(0, trim_qdepth, trim_dscp);
        meta.ecn_off = true;
    }

    /* The controller writes the default entry (every port), and one entry per host-facing port whose
     * ECN marking it turns off. */
    table thresholds {
        key = {
            std.egress_spec : exact @name("port");
        }
        actions = {
            set_thresholds;
            set_host_port_thresholds;
        }
        default_action = set_thresholds(0, 0, 0);
        size = PORT_COUNT;
    }

    /* The caller applies this only to a packet it forwards to a port other than CPU_PORT (and does not
     * count that packet in port_rx itself). */
    apply {
        thresholds.apply();
    }
}

/* What egress saw of the queue a packet leaves (deq_qdepth: the packets left behind it), for
 * TrimAdmission; FabricEgress calls it while trimming is on, with the port counter in the same step. */
#define QUEUE_SEEN(std) queue_depth.write((bit<32>) (std).egress_port << 3 | (bit<32>) (std).priority, \
                                          (qdepth_t) (std).deq_qdepth)

/* Applied in egress, where bmv2 reports how many packets were queued ahead of this one
 * (standard_metadata.enq_qdepth, of the packet's own priority queue):
 *  - depth >= ecn_qdepth, or trimmed: CE on the outermost IP header if it is ECN-capable (RFC 3168
 *    5; while encapsulated that is the outer header, RFC 6040 4.1, and the decapsulating
 *    leaf copies CE inward, RFC 6040 4.2). Not-ECT packets are left alone (RFC 3168 5), and so is
 *    every packet leaving a host-facing port with ECN marking off (meta.ecn_off: a CE it already
 *    carries from the fabric stays, none is added).
 *  - trimmed in ingress: cut to its headers up to the BTH, the DSCP of every IP header set to
 *    trim_dscp and the lengths made true (IPv6 Payload Length RFC 8200 3, IPv4 Total Length RFC 791
 *    3.1, UDP Length RFC 768, checksum 0 as RoCEv2 sends it), then forwarded: the receiver
 *    sees at once which PSN lost its payload and NACKs it instead of waiting for a timeout.
 * While trimming is on it also writes queue_depth for the queue the packet leaves. */
control CongestionSignals(inout headers_t hdr,
                          inout local_metadata_t meta,
                          inout standard_metadata_t std) {
    /* Per egress port: packets this control CE-marked (ECT ones only) and packets it trimmed, so
     * the controller and the tests can check a receiver's counts against the switch's. */
    counter(PORT_COUNT, CounterType.packets) ce_marked;
    counter(PORT_COUNT, CounterType.packets) trimmed;

    /* The caller applies this only to a packet leaving by a port other than CPU_PORT, after it has
     * written queue_depth (queue_seen) while trimming is on. */
    apply {
        if (meta.trim || (meta.ecn_depth != 0 && (qdepth_t) std.enq_qdepth >= meta.ecn_depth)) {
            if (meta.ecn_off) {
                /* A host-facing port with ECN marking off (set_host_port_thresholds): only a trim. */
            } else if (hdr.ipv6.isValid()) {
                if (hdr.ipv6.traffic_class[1:0] != ECN_NOT_ECT) {
                    hdr.ipv6.traffic_class[1:0] = ECN_CE;
                    ce_marked.count((bit<32>) std.egress_port);
                }
            } else if (hdr.ipv4.isValid()) {
                if (hdr.ipv4.ecn != ECN_NOT_ECT) {
                    hdr.ipv4.ecn = ECN_CE;
                    ce_marked.count((bit<32>) std.egress_port);
                }
            }
            if (meta.trim) {
                trimmed.count((bit<32>) std.egress_port);
                /* Everything after the BTH goes; the innermost IP header then carries UDP + BTH. */
                bit<32> l4 = UDP_BYTES + BTH_BYTES;
                bit<32> keep = ETHERNET_BYTES + l4;
                hdr.udp.length = (bit<16>) l4;
                hdr.udp.checksum = 0;
                if (hdr.inner_ipv6.isValid()) {
                    hdr.inner_ipv6.payload_len = (bit<16>) l4;
                    hdr.inner_ipv6.traffic_class[7:2] = meta.trim_class;
                    l4 = l4 + (bit<32>) IPV6_HEADER_BYTES;
                } else if (hdr.inner_ipv4.isValid()) {
                    hdr.inner_ipv4.total_len = (bit<16>) (IPV4_BYTES + l4);
                    hdr.inner_ipv4.dscp = meta.trim_class;
                    l4 = l4 + IPV4_BYTES;
                }
                if (hdr.srh.isValid()) {
                    l4 = l4 + (((bit<32>) hdr.srh.hdr_ext_len + 1) << 3);
                }
                if (hdr.ipv6.isValid()) {
                    hdr.ipv6.payload_len = (bit<16>) l4;
                    hdr.ipv6.traffic_class[7:2] = meta.trim_class;
                    keep = ETHERNET_BYTES + (bit<32>) IPV6_HEADER_BYTES + l4;
                } else if (hdr.ipv4.isValid()) {
                    hdr.ipv4.total_len = (bit<16>) (IPV4_BYTES + l4);
                    hdr.ipv4.dscp = meta.trim_class;
                    keep = ETHERNET_BYTES + IPV4_BYTES + l4;
                }
                truncate(keep);
            }
        }
    }
}

#endif
