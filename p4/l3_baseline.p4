/* l3_baseline.p4: the minimal IPv6 forwarding program the benchmarks compare against
 * (bench/dataplane_pps.py). Ethernet + IPv6, one LPM table, hop limit decremented. */

#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"

parser BaselineParser(packet_in packet, out headers_t hdr, inout local_metadata_t meta,
                      inout standard_metadata_t std) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition accept;
    }
}

control BaselineVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control IngressPipe(inout headers_t hdr, inout local_metadata_t meta, inout standard_metadata_t std) {
    action set_next_hop(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        std.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }

    action drop() {
        mark_to_drop(std);
    }

    table routes_v6 {
        key = {
            hdr.ipv6.dst_addr : lpm @name("dst_addr");
        }
        actions = {
            set_next_hop;
            @defaultonly drop;
        }
        const default_action = drop();
        size = 4096;
    }

    apply {
        if (hdr.ipv6.isValid() && hdr.ipv6.hop_limit > 1) {
            routes_v6.apply();
        } else {
            mark_to_drop(std);
        }
    }
}

control BaselineEgress(inout headers_t hdr, inout local_metadata_t meta, inout standard_metadata_t std) {
    apply { }
}

control BaselineComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control BaselineDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv6);
    }
}

V1Switch(BaselineParser(), BaselineVerifyChecksum(), IngressPipe(), BaselineEgress(),
         BaselineComputeChecksum(), BaselineDeparser()) main;
