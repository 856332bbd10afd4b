/* Congestion signals at the egress queue: ECN CE marking and packet trimming. */
#ifndef __CONGESTION_P4__
#define __CONGESTION_P4__

#include "parser.p4"

/* Applied in egress, where bmv2 reports how many packets were queued ahead of this one
 * (standard_metadata.enq_qdepth). Thresholds come from the controller (the default entry
 * of `thresholds`; 0 turns a signal off):
 *  - depth >= ecn_qdepth: CE on the outermost IP header if it is ECN-capable (RFC 3168
 *    5; while encapsulated that is the outer header, RFC 6040 4.1, and the decapsulating
 *    leaf copies CE inward, RFC 6040 4.2). Not-ECT packets are left alone (RFC 3168 5).
 *  - depth >= trim_qdepth, RoCEv2 only, not an ACK or CNP: the packet is trimmed to its headers up to the
 *    BTH (UEC / MRC packet trimming), the DSCP of every IP header set to trim_dscp and the
 *    lengths made true (IPv6 Payload Length RFC 8200 3, IPv4 Total Length RFC 791 3.1,
 *    UDP Length RFC 768, checksum 0 as RoCEv2 sends it), then forwarded: the receiver
 *    sees at once which PSN lost its payload and NACKs it instead of waiting for a
 *    timeout. A trimmed packet is also CE-marked when ECN-capable. */
control CongestionSignals(inout headers_t hdr,
                          inout local_metadata_t meta,
                          inout standard_metadata_t std) {
    /* Per egress port: packets this control CE-marked (ECT ones only) and packets it trimmed, so
     * the controller and the tests can check a receiver's counts against the switch's. */
    counter(PORT_COUNT, CounterType.packets) ce_marked;
    counter(PORT_COUNT, CounterType.packets) trimmed;

    qdepth_t ecn_depth = 0;
    qdepth_t trim_depth = 0;
    bit<6>   trim_class = 0;

    action set_thresholds(qdepth_t ecn_qdepth, qdepth_t trim_qdepth, bit<6> trim_dscp) {
        ecn_depth = ecn_qdepth;
        trim_depth = trim_qdepth;
        trim_class = trim_dscp;
    }

    /* Keyless: the controller writes its default entry. */
    table thresholds {
        actions = {
            set_thresholds;
        }
        default_action = set_thresholds(0, 0, 0);
        size = 1;
    }

    apply {
        if (std.egress_port == CPU_PORT) {
            return;
        }
        thresholds.apply();
        bool trim = trim_depth != 0 && (qdepth_t) std.enq_qdepth >= trim_depth && hdr.bth.isValid()
                    && hdr.udp.isValid() && hdr.bth.opcode != BTH_OPCODE_RC_ACKNOWLEDGE
                    && hdr.bth.opcode != BTH_OPCODE_CNP;
        if (trim || (ecn_depth != 0 && (qdepth_t) std.enq_qdepth >= ecn_depth)) {
            if (hdr.ipv6.isValid()) {
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
        }
        if (!trim) {
            return;
        }
        trimmed.count((bit<32>) std.egress_port);
        /* Everything after the BTH goes; the innermost IP header then carries UDP + BTH. */
        bit<32> l4 = UDP_BYTES + BTH_BYTES;
        bit<32> keep = ETHERNET_BYTES + l4;
        hdr.udp.length = (bit<16>) l4;
        hdr.udp.checksum = 0;
        if (hdr.inner_ipv6.isValid()) {
            hdr.inner_ipv6.payload_len = (bit<16>) l4;
            hdr.inner_ipv6.traffic_class[7:2] = trim_class;
            l4 = l4 + (bit<32>) IPV6_HEADER_BYTES;
        } else if (hdr.inner_ipv4.isValid()) {
            hdr.inner_ipv4.total_len = (bit<16>) (IPV4_BYTES + l4);
            hdr.inner_ipv4.dscp = trim_class;
            l4 = l4 + IPV4_BYTES;
        }
        if (hdr.srh.isValid()) {
            l4 = l4 + (((bit<32>) hdr.srh.hdr_ext_len + 1) << 3);
        }
        if (hdr.ipv6.isValid()) {
            hdr.ipv6.payload_len = (bit<16>) l4;
            hdr.ipv6.traffic_class[7:2] = trim_class;
            keep = ETHERNET_BYTES + (bit<32>) IPV6_HEADER_BYTES + l4;
        } else if (hdr.ipv4.isValid()) {
            hdr.ipv4.total_len = (bit<16>) (IPV4_BYTES + l4);
            hdr.ipv4.dscp = trim_class;
            keep = ETHERNET_BYTES + IPV4_BYTES + l4;
        }
        truncate(keep);
    }
}

#endif
