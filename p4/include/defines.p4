/* Constants and types shared by srv6_spray.p4 and eecmp_qp_hash.p4. */
#ifndef __DEFINES_P4__
#define __DEFINES_P4__

typedef bit<9>   port_t;
typedef bit<48>  mac_addr_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;

/* The CPU port. bmv2 must be started with --cpu-port 255: its default maps the
 * CPU port to the drop port (511), so packet-in would silently vanish. */
const port_t CPU_PORT = 255;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86DD;

/* IANA protocol numbers. */
const bit<8> PROTO_IPV4    = 4;
const bit<8> PROTO_TCP     = 6;
const bit<8> PROTO_UDP     = 17;
const bit<8> PROTO_IPV6    = 41;
const bit<8> PROTO_ROUTING = 43;   /* IPv6 Routing header, RFC 8200 4.4 */

/* RFC 8754 2: the Segment Routing Header is Routing Type 4. */
const bit<8> ROUTING_TYPE_SRH = 4;

/* Depth of the parsed SRH segment list. Four 128-bit entries carry 4 uSID carriers,
 * i.e. up to 24 F3216 uSIDs, or 4 classic SIDs: enough for any two-tier Clos path
 * and its detours. A deeper SRH is dropped (SRH_TOO_DEEP), never forwarded half-read. */
#define SRH_MAX_SEGMENTS 4

/* RoCEv2: IBTA Annex A17, UDP destination port 4791. */
const bit<16> ROCE_V2_UDP_PORT = 4791;

const bit<16> IPV6_HEADER_BYTES = 40;
const bit<16> SRH_FIXED_BYTES   = 8;
const bit<8>  ENCAP_HOP_LIMIT   = 64;

/* Hash modes, chosen per destination by the controller. */
const bit<2> HASH_FLOW   = 0;  /* IP 5-tuple */
const bit<2> HASH_QP     = 1;  /* 5-tuple + BTH DestQP (Meta's E-ECMP) */
const bit<2> HASH_PACKET = 2;  /* 5-tuple + DestQP + PSN: per-packet spraying (MRC) */
const bit<2> HASH_PIN    = 3;  /* member = destination host index (path pinning) */

/* Drop reasons: the index into the drop_reasons counter (docs/pipeline.md). */
typedef bit<8> drop_reason_t;
const drop_reason_t DROP_NONE              = 0;
const drop_reason_t DROP_SRH_TRUNCATED     = 1;
const drop_reason_t DROP_SRH_SEGMENTS_LEFT = 2;
const drop_reason_t DROP_ROUTING_TYPE      = 3;
const drop_reason_t DROP_HOP_LIMIT         = 4;
const drop_reason_t DROP_BTH_TRUNCATED     = 5;
const drop_reason_t DROP_USID_NO_MATCH     = 6;
const drop_reason_t DROP_NO_ROUTE          = 7;
const drop_reason_t DROP_SRH_TOO_DEEP      = 8;
const drop_reason_t DROP_SRH_LENGTH        = 9;
const drop_reason_t DROP_SID_NO_NEXT       = 10;
const drop_reason_t DROP_PARSER_OTHER      = 11;
const drop_reason_t DROP_IPV4_CHECKSUM     = 12;
const drop_reason_t DROP_IPV4_IHL          = 13;
const drop_reason_t DROP_CONTROLLER        = 14;
const drop_reason_t DROP_NO_PATH           = 15;
const drop_reason_t DROP_DECAP_INVALID     = 16;
const drop_reason_t DROP_NOT_IP            = 17;
const drop_reason_t DROP_ECN_NOT_ECT       = 18;
const drop_reason_t DROP_IPV6_VERSION      = 19;
const drop_reason_t DROP_IPV6_LENGTH       = 20;
const drop_reason_t DROP_SR_BOUNDARY       = 21;
const drop_reason_t DROP_HOST_SOURCE       = 22;
const drop_reason_t DROP_HOST_SR_STEERING  = 23;
#define DROP_REASON_COUNT 32

/* ECN codepoints, RFC 3168 5: the low two bits of the IPv6 Traffic Class. */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE      = 3;

/* Header sizes the parser and the trimming need (bytes). */
const bit<32> ETHERNET_BYTES    = 14;
const bit<32> PACKET_OUT_BYTES  = 2;
const bit<32> IPV4_BYTES        = 20;
const bit<32> UDP_BYTES         = 8;
const bit<32> BTH_BYTES         = 12;

/* bmv2's queue depths (standard_metadata.enq_qdepth) are in packets, 19 bits wide. */
typedef bit<19> qdepth_t;

#define PORT_COUNT 512

/* Priority queues per egress port (bmv2: simple_switch_grpc -- --priority-queues 2; with one queue
 * bmv2 drops a packet of priority 1). Queue 0 carries the traffic; TRIM_PRIORITY, served first, carries
 * trimmed headers and every packet whose DSCP is the trim class (the endpoint's NACKs, ACKs and CNPs,
 * and headers trimmed at an earlier hop). queue_depth is indexed port << 3 | priority. */
const bit<3> TRIM_PRIORITY = 1;
#define QUEUE_INDEX_COUNT 4096

/* RoCEv2 BTH opcodes that are never trimmed (IBTA Vol. 1 9.2, Annex A17 for the CNP): an RC ACK
 * carries no payload to cut and its sender needs it whole; a CNP is the congestion signal itself. */
#define BTH_OPCODE_RC_ACKNOWLEDGE 0x11
#define BTH_OPCODE_CNP 0x81

#endif
