/* The SR-domain boundary at host ports, and the endpoint-mode policy that opens it. */
#ifndef __SR_BOUNDARY_P4__
#define __SR_BOUNDARY_P4__

#include "parser.p4"

/* RFC 8754 5.1 and RFC 8986 8: the fabric's SIDs are only for packets that entered the SR
 * domain through a trusted node; a host port is outside the domain. Per host port the
 * controller installs one `host_policy` entry (ports without one are fabric ports and are
 * not checked here); the same entry gives srv6_spray.p4's headend its source address:
 *  - every IPv6 packet from the port must carry the host's own source address (ingress
 *    filtering, RFC 8754 5.1 / BCP 38): otherwise HOST_SOURCE; and a hop limit the leaf
 *    may forward (> 1): otherwise HOP_LIMIT;
 *  - `sr_boundary` (the default policy): a packet to the fabric's uSID block, or with any
 *    Routing header, or tunnelling an inner IP header (IPv6- or IPv4-in-IPv6) is dropped
 *    as SR_BOUNDARY;
 *  - `host_source_routing` (endpoint mode, the host is an SRv6 source: MRC NICs write
 *    their own carriers): such a packet passes only as a uSID carrier into the fabric:
 *    destination in the block, first uSID one this leaf lets hosts start with
 *    (`host_first_usid`: its spines' uNs and its own), every SRH segment in the block, no
 *    other Routing type; otherwise HOST_SR_STEERING. It then transits like any carrier. */
control SrBoundary(in headers_t hdr,
                   inout local_metadata_t meta,
                   in standard_metadata_t std) {
    /* One entry per host port, all the port's data in one lookup (docs/pipeline.md, per-role cost): the
     * host's own address and the fabric's uSID block (the boundary's), and the headend's: the source of
     * its encapsulation (the port's DX6 SID) and `headend` 1 while the controller has the port up (0: RoCEv2
     * from it is not sprayed, as before when host_port had no entry for a port down). */
    action sr_boundary(ipv6_addr_t host_addr, bit<32> usid_block, ipv6_addr_t src_addr, bit<1> headend) {
        meta.boundary_host = host_addr;
        meta.usid_block = usid_block;
        meta.headend_src = src_addr;
        meta.headend = headend == 1;
        meta.allow_sr = false;
    }

    action host_source_routing(ipv6_addr_t host_addr, bit<32> usid_block, ipv6_addr_t src_addr, bit<1> headend) {
        meta.boundary_host = host_addr;
        meta.usid_block = usid_block;
        meta.headend_src = src_addr;
        meta.headend = headend == 1;
        meta.allow_sr = true;
    }

    table host_policy {
        key = {
            std.ingress_port : exact @name("ingress_port");
        }
        actions = {
            sr_boundary;
            host_source_routing;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 512;
    }

    action first_usid_allowed() {
    }

    table host_first_usid {
        key = {
            meta.first_usid : exact @name("first_usid");
        }
        actions = {
            first_usid_allowed;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 1024;
    }

    /* The caller applies this to IPv6 packets only. A miss (a fabric port) costs the lookup and nothing
     * else; no `return` (p4c makes each one a condition before every later statement). */
    apply {
        if (host_policy.apply().hit) {
            if (hdr.ipv6.src_addr != meta.boundary_host) {
                meta.drop_reason = DROP_HOST_SOURCE;
            } else if (hdr.ipv6.hop_limit <= 1) {
                /* RFC 8200 3, RFC 2473 3.1: the leaf is the first router of the host's packet and
                 * forwards it (into a tunnel or not): a hop limit that would expire here is dropped. */
                meta.drop_reason = DROP_HOP_LIMIT;
            } else if (hdr.ipv6.dst_addr[127:96] != meta.usid_block && !hdr.srh.isValid() && !hdr.routing.isValid()
                       && !hdr.inner_ipv6.isValid() && !hdr.inner_ipv4.isValid()) {
                /* plain traffic: the headend's */
            } else if (!meta.allow_sr) {
                meta.drop_reason = DROP_SR_BOUNDARY;
            } else if (hdr.ipv6.dst_addr[127:96] != meta.usid_block || hdr.routing.isValid()) {
                meta.drop_reason = DROP_HOST_SR_STEERING;
            } else if (hdr.srh.isValid()
                       && ((hdr.srh_segments[0].isValid() && hdr.srh_segments[0].sid[127:96] != meta.usid_block)
                           || (hdr.srh_segments[1].isValid() && hdr.srh_segments[1].sid[127:96] != meta.usid_block)
                           || (hdr.srh_segments[2].isValid() && hdr.srh_segments[2].sid[127:96] != meta.usid_block)
                           || (hdr.srh_segments[3].isValid() && hdr.srh_segments[3].sid[127:96] != meta.usid_block))) {
                meta.drop_reason = DROP_HOST_SR_STEERING;
            } else {
                meta.first_usid = hdr.ipv6.dst_addr[95:80];
                if (!host_first_usid.apply().hit) {
                    meta.drop_reason = DROP_HOST_SR_STEERING;
                }
            }
        }
    }
}

#endif
