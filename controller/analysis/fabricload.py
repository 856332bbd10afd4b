"""Every link's load under a collective, per path-selection scheme, on a regular multi-plane two-tier Clos
of any size (up to the planner's MRC fabric), and the completion time those loads allow.

Model (docs/collectives.md, "Analysis at fabric scale"): one iteration is its steps one after another; a
step's flows share the links, so the step takes its most loaded link's bytes over that link's rate (a
host NIC port, or a leaf-spine link in either direction); traffic between two ranks of one leaf stays in
the leaf. The collective's distinct steps come from workload.patterns; QP scaling from the workload
(split: every message over all QPs; round-robin: a connection's message m on QP m mod qps; a QP's plane
is its index mod the planes, as the lab's senders do). Schemes:

    ecmp        eecmp_qp_hash.p4 FIVE_TUPLE: bmv2's crc32 of (src, dst, 17, sport, 4791) over the hosts'
                IPv4 addresses as ::ffff:a.b.c.d; member = hash mod live uplinks towards the destination leaf
    eecmp       the same with the BTH destination QP (Meta's E-ECMP)
    pin         eecmp_qp_hash.p4 PIN: member = destination host index (its slot: the leaf's downlink
                index, Meta's "slice") mod the live uplinks
    leaf_spray  srv6_spray.p4 PACKET: every packet hashed with its PSN, i.e. an even split over the
                live spines of the QP's plane
    host_spray  endpoint mode (MRC): the host sprays over every live (plane, spine) path, evenly
    ethereal    Ethereal: a source leaf's flows split into equal single-path parts (_parts: enough that its
                flows cover its paths as evenly as whole parts can), a flow's parts on the least-loaded
                paths (busiest of NIC ports, uplink, destination downlink) taken plane by plane so they
                share the NIC ports evenly; one flow of every source leaf at a time, on the loads so far
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from controller.analysis import bmv2hash
from controller.model.sids import SidPlan
from controller.plan.evs import LEAF_CHOICE, SPINE_BITS
from controller.workload import Placement, Workload, patterns

Scheme = Literal["ecmp", "eecmp", "pin", "leaf_spray", "host_spray", "ethereal"]
SCHEMES: tuple[Scheme, ...] = ("ecmp", "eecmp", "pin", "leaf_spray", "host_spray", "ethereal")
SCHEME_NAMES = {"ecmp": "5-tuple ECMP", "eecmp": "E-ECMP (dst QP)", "pin": "path pinning",
                "leaf_spray": "leaf spraying", "host_spray": "host EV spraying", "ethereal": "Ethereal split+assign"}
_PER_QP = ("ecmp", "eecmp", "pin", "leaf_spray")  # schemes whose path or plane follows the QP
_CHUNK = 4096
MAX_PARTS = 20_000_000  # a step's QP parts: ~200 bytes each through the hash and the scheme (all-to-all at 1,024 ranks x 8 QPs: 8.4 M, 1.8 GB)


class LoadError(ValueError):
    """A fabric, workload or scheme the load analysis cannot take (one line)."""


@dataclass(frozen=True)
class Fabric:
    """A regular fabric: `planes` planes of `spines` T1 and `leaves` T0, `hosts_per_leaf` hosts per T0,
    host k on leaf k // hosts_per_leaf (slot k % hosts_per_leaf) in every plane; rates in bits per second."""

    planes: int
    spines: int
    leaves: int
    hosts_per_leaf: int
    host_bps: float = 100e9
    link_bps: float = 100e9

    @property
    def hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def paths(self) -> int:
        """(plane, spine) columns: a leaf-to-leaf path is one of them."""
        return self.planes * self.spines


@dataclass
class Failed:
    """Which leaf-spine links are usable: alive[plane, leaf, spine] (a dead T1 kills its links)."""

    alive: np.ndarray
    links: tuple[tuple[int, int, int], ...] = ()
    spines: tuple[tuple[int, int], ...] = ()

    @classmethod
    def healthy(cls, fabric: Fabric) -> Failed:
        return cls(np.ones((fabric.planes, fabric.leaves, fabric.spines), dtype=bool))

    @property
    def any(self) -> bool:
        return not bool(self.alive.all())

    def leaf_links(self) -> np.ndarray:
        """Usable uplinks of each leaf, summed over planes."""
        return self.alive.sum(axis=(0, 2))


def draw(fabric: Fabric, rng: np.random.Generator, kind: str, count: int, leaves: np.ndarray | None = None) -> Failed:
    """`count` distinct random failures of a kind: 'link' (leaf-spine links of `leaves`, default every
    leaf) or 't1' (spine switches)."""
    f = Failed.healthy(fabric)
    if kind == "t1":
        total = fabric.planes * fabric.spines
        if count > total:
            raise LoadError(f"{count} T1 failures: the fabric has {total} T1 switches")
        pick = rng.choice(total, size=count, replace=False)
        p, j = np.divmod(pick, fabric.spines)
        f.alive[p, :, j] = False
        f.spines = tuple(zip(p.tolist(), j.tolist()))
        return f
    rows = np.arange(fabric.leaves) if leaves is None else np.unique(leaves)
    total = fabric.planes * len(rows) * fabric.spines
    if count > total:
        raise LoadError(f"{count} link failures: the job's leaves have {total} leaf-spine links")
    pick = rng.choice(total, size=count, replace=False)
    p, rest = np.divmod(pick, len(rows) * fabric.spines)
    li, j = np.divmod(rest, fabric.spines)
    f.alive[p, rows[li], j] = False
    f.links = tuple(zip(p.tolist(), rows[li].tolist(), j.tolist()))
    return f


@dataclass
class Variant:
    """Steps of one iteration that put the same parts on the fabric, `repeat` of them: part i goes from
    host src[i] (leaf a[i]) to host dst[i] (leaf b[i]) on QP qp[i] (plane[i], UDP sport[i]), bytes[i] bytes."""

    src: np.ndarray
    dst: np.ndarray
    a: np.ndarray
    b: np.ndarray
    slot_b: np.ndarray
    plane: np.ndarray
    qp: np.ndarray
    sport: np.ndarray
    bytes: np.ndarray
    repeat: int
    hashes: dict[str, np.ndarray] = field(default_factory=dict)
    hash_key: int | None = None  # ecmp/eecmp: None for bmv2's crc32; else a random hash keyed with it


def variants(workload: Workload, placement: Placement, fabric: Fabric, per_qp: bool) -> list[Variant]:
    """One iteration's distinct steps as parts (per_qp: expanded over the workload's QPs; else whole flows)."""
    n = placement.size
    leaf = np.asarray(placement.leaves, dtype=np.int64)
    slot = np.asarray(placement.slots, dtype=np.int64)
    if int(leaf.max()) >= fabric.leaves or int(slot.max()) >= fabric.hosts_per_leaf:
        raise LoadError("the placement does not fit this fabric")
    host = leaf * fabric.hosts_per_leaf + slot
    out: list[Variant] = []
    q_all = workload.qps
    pats = patterns(workload.collective, n)
    widest = max(len(p.src) for p in pats) * (q_all if per_qp and workload.strategy == "split" else 1)
    if widest > MAX_PARTS:
        raise LoadError(f"one step of this job is {widest:,} QP parts, more than the {MAX_PARTS:,} the analysis "
                        "holds in memory (about 4 GB); fewer ranks (--ranks) or QPs")
    for p in pats:
        nbytes = p.chunks * (workload.size / n)
        if not per_qp:
            out.append(_variant(host, leaf, slot, p.src, p.dst, nbytes, 0, workload, fabric, p.repeat))
        elif workload.strategy == "split":
            src, dst = np.repeat(p.src, q_all), np.repeat(p.dst, q_all)
            qs = np.tile(np.arange(q_all), len(p.src))
            out.append(_variant(host, leaf, slot, src, dst, np.repeat(nbytes, q_all) / q_all, qs, workload, fabric,
                                p.repeat))
        else:
            for q in range(q_all):
                count = len(range(q, p.repeat, q_all))
                if count:
                    out.append(_variant(host, leaf, slot, p.src, p.dst, nbytes, q, workload, fabric, count))
    return out


SPORT_RULES = ("qp", "ev", "qp-crc")


def lab_sport(plane: np.ndarray, qpn: np.ndarray, rule: str) -> np.ndarray:
    """The RoCEv2 UDP source port of each part by the rule a sender follows:
    'qp': 0xC000 | (QP number & 0x3FFF) (the workload's own);
    'ev': the lab's leaf schemes (endpoint.collective, Transport sport 'ev'): the port of the EV the
          part rides, one EV per plane without a carrier (id plane << 10 | the leaf's choice), so every
          QP of every host pair in a plane has one port;
    'qp-crc': the lab's per-QP port on the kernel (rank.qp_sport): 0xC000 | (crc32 of the QP number's
          4 bytes & 0x3FFF)."""
    if rule == "qp":
        return 0xC000 | (qpn & 0x3FFF)
    if rule == "ev":
        return 0xC000 | (((plane << SPINE_BITS) | LEAF_CHOICE) & 0x3FFF)  # plan.evs.ev_id(plane, LEAF_CHOICE)
    if rule == "qp-crc":
        return np.asarray([0xC000 | (zlib.crc32(int(q).to_bytes(4, "big")) & 0x3FFF) for q in qpn.ravel()],
                          dtype=np.int64).reshape(qpn.shape)
    raise LoadError(f"UDP source port rule {rule!r} is not one of {', '.join(SPORT_RULES)}")


def with_sports(vs: list[Variant], rule: str) -> list[Variant]:
    """The variants with every part's UDP source port set by `rule` (lab_sport); hashes recomputed."""
    return [replace(v, sport=lab_sport(v.plane, v.qp, rule), hashes={}) for v in vs]


def with_hash_key(vs: list[Variant], key: int | None) -> list[Variant]:
    """The variants hashed, under ecmp and eecmp, by a random hash keyed with `key` instead of bmv2's crc32:
    Linux's multipath hash (the kernel lab's leaves) is a jhash keyed at random once per boot, so only its
    distribution over keys can be predicted, not which flows collide."""
    return [replace(v, hashes={}, hash_key=key) for v in vs]


_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93, 0xA0761D6478BD642F)


def keyed_hash(key: int, *fields: np.ndarray) -> np.ndarray:
    """A 31-bit hash of each row's fields keyed with `key` (splitmix64's finalizer over a keyed mix): as
    good as uniform over the keys, like a jhash with a random seed."""
    x = np.full(np.broadcast(*fields).shape, (key * _MIX[0]) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    for i, f in enumerate(fields):
        x = (x ^ np.asarray(f, dtype=np.uint64)) * np.uint64(_MIX[1 + i % 4])
        x ^= x >> np.uint64(31)
    x ^= x >> np.uint64(30)
    x *= np.uint64(_MIX[1])
    x ^= x >> np.uint64(27)
    x *= np.uint64(_MIX[2])
    x ^= x >> np.uint64(31)
    return (x >> np.uint64(33)).astype(np.int64)


def _variant(host: np.ndarray, leaf: np.ndarray, slot: np.ndarray, src: np.ndarray, dst: np.ndarray,
             nbytes: np.ndarray, q: np.ndarray | int, w: Workload, fabric: Fabric, repeat: int) -> Variant:
    qs = np.broadcast_to(np.asarray(q, dtype=np.int64), src.shape)
    qpn = w.qp_base + qs
    sport = np.full(src.shape, w.sport, dtype=np.int64) if w.sport is not None else 0xC000 | (qpn & 0x3FFF)
    return Variant(host[src], host[dst], leaf[src], leaf[dst], slot[dst], qs % fabric.planes, qpn, sport,
                   np.asarray(nbytes, dtype=np.float64), repeat)


@dataclass
class Loads:
    """Bytes per link of one step (or summed over an iteration): host ports up/down [plane, host] and
    leaf-spine links up (leaf -> spine) and down (spine -> leaf) [leaf, plane * spines + spine]."""

    host_up: np.ndarray
    host_down: np.ndarray
    up: np.ndarray
    down: np.ndarray
    cut: bool = False

    @classmethod
    def zero(cls, fabric: Fabric) -> Loads:
        h = (fabric.planes, fabric.hosts)
        f = (fabric.leaves, fabric.paths)
        return cls(np.zeros(h), np.zeros(h), np.zeros(f), np.zeros(f))

    def time(self, fabric: Fabric) -> float:
        """Seconds to carry these bytes: the most loaded link over its rate."""
        if self.cut:
            return float("inf")
        host = max(float(self.host_up.max(initial=0)), float(self.host_down.max(initial=0))) * 8 / fabric.host_bps
        link = max(float(self.up.max(initial=0)), float(self.down.max(initial=0))) * 8 / fabric.link_bps
        return max(host, link)

    def add(self, other: Loads, times: float = 1.0) -> None:
        self.host_up += other.host_up * times
        self.host_down += other.host_down * times
        self.up += other.up * times
        self.down += other.down * times
        self.cut = self.cut or other.cut


def addresses(fabric: Fabric, hosts: np.ndarray, plane: np.ndarray, sids: SidPlan = SidPlan()) -> np.ndarray:
    """The hosts' IPv4 addresses in a plane (controller.model.sids.host_v4: eecmp's hosts)."""
    leaf, slot = np.divmod(hosts, fabric.hosts_per_leaf)
    return (sids.v4_base << 24) | (plane << 20) | (leaf << 9) | (slot + 1)


def step_loads(v: Variant, scheme: Scheme, fabric: Fabric, failed: Failed) -> Loads:
    """The loads of one step of a variant under a scheme."""
    if scheme in ("ecmp", "eecmp", "pin"):
        return _hashed(v, scheme, fabric, failed)
    if scheme == "leaf_spray":
        return _leaf_spray(v, fabric, failed)
    if scheme == "host_spray":
        return _host_spray(v, fabric, failed)
    if scheme == "ethereal":
        return _ethereal(v, fabric, failed)
    raise LoadError(f"scheme {scheme!r} is not one of {', '.join(SCHEMES)}")


def _host_ports(out: Loads, v: Variant, plane: np.ndarray, nbytes: np.ndarray, fabric: Fabric,
                rows: np.ndarray | None = None) -> None:
    src, dst = (v.src, v.dst) if rows is None else (v.src[rows], v.dst[rows])
    size = fabric.planes * fabric.hosts
    out.host_up += np.bincount(plane * fabric.hosts + src, nbytes, size).reshape(out.host_up.shape)
    out.host_down += np.bincount(plane * fabric.hosts + dst, nbytes, size).reshape(out.host_down.shape)


def _fabric_single(out: Loads, a: np.ndarray, b: np.ndarray, col: np.ndarray, nbytes: np.ndarray,
                   fabric: Fabric) -> None:
    size = fabric.leaves * fabric.paths
    out.up += np.bincount(a * fabric.paths + col, nbytes, size).reshape(out.up.shape)
    out.down += np.bincount(b * fabric.paths + col, nbytes, size).reshape(out.down.shape)


def _pick(h: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Member h mod (live members) of each row's live members in ascending order, and whether any is live."""
    cnt = mask.sum(axis=1)
    ok = cnt > 0
    idx = np.where(ok, h % np.maximum(cnt, 1), 0)
    return np.argmax(np.cumsum(mask, axis=1) > idx[:, None], axis=1), ok


def scheme_hash(v: Variant, scheme: Scheme, fabric: Fabric) -> np.ndarray:
    """The selector key of each part under a hashing scheme (cached on the variant)."""
    h = v.hashes.get(scheme)
    if h is None:
        if scheme == "pin":
            h = v.slot_b
        elif v.hash_key is not None:
            fields = (v.src, v.dst, v.plane, v.sport) + ((v.qp,) if scheme == "eecmp" else ())
            h = keyed_hash(v.hash_key, *fields)
        else:
            src = addresses(fabric, v.src, v.plane)
            dst = addresses(fabric, v.dst, v.plane)
            h = bmv2hash.eecmp(src, dst, v.sport, v.qp if scheme == "eecmp" else None)
        v.hashes[scheme] = h
    return h


def _hashed(v: Variant, scheme: Scheme, fabric: Fabric, failed: Failed) -> Loads:
    out = Loads.zero(fabric)
    _host_ports(out, v, v.plane, v.bytes, fabric)
    cross = np.nonzero(v.a != v.b)[0]
    h = scheme_hash(v, scheme, fabric)[cross]
    p, a, b = v.plane[cross], v.a[cross], v.b[cross]
    spine = h % fabric.spines
    if failed.any:
        dead = np.logical_not(failed.alive.all(axis=2))
        hit = np.nonzero(dead[p, a] | dead[p, b])[0]
        for lo in range(0, len(hit), _CHUNK):
            r = hit[lo:lo + _CHUNK]
            j, ok = _pick(h[r], failed.alive[p[r], a[r]] & failed.alive[p[r], b[r]])
            spine[r] = j
            out.cut = out.cut or not bool(ok.all())
    _fabric_single(out, a, b, p * fabric.spines + spine, v.bytes[cross], fabric)
    return out


def _spread(out: Loads, a: np.ndarray, b: np.ndarray, total: np.ndarray, allowed: np.ndarray, fabric: Fabric) -> None:
    """Split each row's bytes evenly over its allowed (plane, spine) columns; rows sorted by nothing in particular."""
    cnt = allowed.sum(axis=1)
    if not bool((cnt > 0).all()):
        out.cut = True
    w = allowed * (total / np.maximum(cnt, 1))[:, None]
    for arr, key in ((out.up, a), (out.down, b)):
        order = np.argsort(key, kind="stable")
        keys = key[order]
        starts = np.r_[0, np.nonzero(np.diff(keys))[0] + 1]
        arr[keys[starts]] += np.add.reduceat(w[order], starts, axis=0)


def _pairs(key: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, inv, np.bincount(inv, nbytes)


def _leaf_spray(v: Variant, fabric: Fabric, failed: Failed) -> Loads:
    out = Loads.zero(fabric)
    _host_ports(out, v, v.plane, v.bytes, fabric)
    cross = np.nonzero(v.a != v.b)[0]
    P, L, S = fabric.planes, fabric.leaves, fabric.spines
    uniq, _, total = _pairs((v.plane[cross] * L + v.a[cross]) * L + v.b[cross], v.bytes[cross])
    pa, b = np.divmod(uniq, L)
    p, a = np.divmod(pa, L)
    for lo in range(0, len(uniq), _CHUNK):
        s = slice(lo, lo + _CHUNK)
        allowed = np.zeros((len(uniq[s]), fabric.paths), dtype=bool)
        live = failed.alive[p[s], a[s]] & failed.alive[p[s], b[s]]
        cols = p[s][:, None] * S + np.arange(S)[None, :]
        np.put_along_axis(allowed, cols, live, axis=1)
        _spread(out, a[s], b[s], total[s], allowed, fabric)
    return out


def _pair_paths(failed: Failed, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(rows, planes * spines): the live (plane, spine) paths from leaf a to leaf b."""
    return (failed.alive[:, a, :] & failed.alive[:, b, :]).transpose(1, 0, 2).reshape(len(a), -1)


def _host_spray(v: Variant, fabric: Fabric, failed: Failed) -> Loads:
    out = Loads.zero(fabric)
    P, L, S = fabric.planes, fabric.leaves, fabric.spines
    uniq, inv, total = _pairs(v.a * L + v.b, v.bytes)
    a, b = np.divmod(uniq, L)
    share = np.zeros((len(uniq), P))
    for lo in range(0, len(uniq), _CHUNK):
        s = slice(lo, lo + _CHUNK)
        live = _pair_paths(failed, a[s], b[s])
        local = a[s] == b[s]
        per_plane = live.reshape(len(live), P, S).sum(axis=2).astype(np.float64)
        per_plane[local] = 1.0  # within a leaf: every plane's port, evenly
        share[s] = per_plane / np.maximum(per_plane.sum(axis=1, keepdims=True), 1)
        far = ~local
        if far.any():
            _spread(out, a[s][far], b[s][far], total[s][far], live[far], fabric)
    for p in range(P):
        _host_ports(out, v, np.full(len(v.src), p), v.bytes * share[inv, p], fabric)
    return out


def _place(out: Loads, a: np.ndarray, b: np.ndarray, src: np.ndarray, dst: np.ndarray, col: np.ndarray,
           part: np.ndarray, spines: int) -> None:
    """Parts on their paths: uplink of a, downlink into b, and the NIC ports of the path's plane."""
    np.add.at(out.up, (a, col), part)
    np.add.at(out.down, (b, col), part)
    np.add.at(out.host_up, (col // spines, src), part)
    np.add.at(out.host_down, (col // spines, dst), part)


def _by_plane(cost: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Columns (plane * spines + spine) of each row's k cheapest finite paths in plane-major rounds: the
    cheapest of every plane (planes by cost), then the second of every plane, and so on."""
    rows, planes, spines = cost.shape
    kmax = int(k.max())
    r = min(spines, -(-kmax // planes))
    while True:
        if r < spines:
            idx = np.argpartition(cost, r - 1, axis=2)[:, :, :r]
        else:
            idx = np.broadcast_to(np.arange(spines), cost.shape).copy()
        c = np.take_along_axis(cost, idx, axis=2)
        o = np.argsort(c, axis=2, kind="stable")
        idx, c = np.take_along_axis(idx, o, axis=2), np.take_along_axis(c, o, axis=2)  # each plane's r cheapest, sorted
        if r >= spines or bool((np.isfinite(c).sum(axis=(1, 2)) >= k).all()):
            break
        r = min(spines, 2 * r)
    col = (np.arange(planes)[None, :, None] * spines + idx).transpose(0, 2, 1).reshape(rows, -1)  # round-major
    c = c.transpose(0, 2, 1)
    within = np.argsort(c, axis=2, kind="stable")  # in each round, planes by cost
    col = np.take_along_axis(col.reshape(rows, r, planes), within, axis=2).reshape(rows, -1)
    dead = np.isinf(np.take_along_axis(c, within, axis=2).reshape(rows, -1))
    first = np.argsort(dead, axis=1, kind="stable")[:, :kmax]
    return np.take_along_axis(col, first, axis=1)


def _parts(flows: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """Ethereal's split: equal parts per flow so that a source leaf's flows x parts cover its paths as evenly
    as whole parts can. From k0 = ceil(paths / flows) up to 16 k0 (and at most one part a path), the k whose
    busiest path, ceil(flows k / paths) parts of 1/k flow, carries least; the smallest such k."""
    paths = np.maximum(paths, 1)
    k0 = np.minimum(-(-paths // flows), paths)
    ks = k0[:, None] + np.arange(min(15 * int(k0.max()), int(paths.max())) + 1)[None, :]
    ok = (ks <= 16 * k0[:, None]) & (ks <= paths[:, None])
    load = np.where(ok, -(-(flows[:, None] * ks) // paths[:, None]) / ks, np.inf)
    return np.take_along_axis(ks, np.argmin(load, axis=1)[:, None], axis=1)[:, 0]


def _ethereal(v: Variant, fabric: Fabric, failed: Failed) -> Loads:
    out = Loads.zero(fabric)
    P, S, PS = fabric.planes, fabric.spines, fabric.paths
    local = np.nonzero(v.a == v.b)[0]
    for p in range(P):
        _host_ports(out, v, np.full(len(local), p), v.bytes[local] / P, fabric, local)
    cross = np.nonzero(v.a != v.b)[0]
    if not len(cross):
        return out
    order = cross[np.argsort(v.a[cross], kind="stable")]
    a_sorted = v.a[order]
    first = np.r_[0, np.nonzero(np.diff(a_sorted))[0] + 1]
    counts = np.diff(np.r_[first, len(order)])
    rank = np.arange(len(order)) - np.repeat(first, counts)
    flows_of_leaf = np.repeat(counts, counts)
    # ties go round the paths plane by plane (spine 0 of every plane, then spine 1 ...), from a point
    # that depends on the leaf pair, so equal costs spread a flow's parts over the planes' NIC ports
    pos = np.empty(PS, dtype=np.int64)
    pos[(np.arange(PS) % P) * S + np.arange(PS) // P] = np.arange(PS)
    for r in range(int(rank.max()) + 1):
        rows = order[rank == r]
        nflows = flows_of_leaf[rank == r]
        a, b = v.a[rows], v.b[rows]
        live = _pair_paths(failed, a, b)
        n_live = live.sum(axis=1)
        if not bool((n_live > 0).all()):
            out.cut = True
        k = _parts(nflows, n_live)
        part = v.bytes[rows] / k
        whole = k >= n_live  # a flow with a path for each part: its equal split over every live path
        if whole.any():
            w = np.nonzero(whole)[0]
            _spread(out, a[w], b[w], v.bytes[rows][w], live[w], fabric)
            share = live[w].reshape(len(w), P, S).sum(axis=2) / np.maximum(n_live[w], 1)[:, None]
            for p in range(P):
                _host_ports(out, v, np.full(len(w), p), v.bytes[rows][w] * share[:, p], fabric, rows[w])
        offset = (a * 7 + b * 13) % PS
        unit = part * 8 / max(fabric.link_bps, fabric.host_bps) * 1e-3  # well under one part's time
        tie = ((pos[None, :] - offset[:, None]) % PS) / (PS + 1) * unit[:, None]
        src, dst = v.src[rows], v.dst[rows]
        m = np.nonzero(~whole)[0]
        if not len(m):
            continue
        links = np.maximum(out.up[a[m]], out.down[b[m]]) * 8 / fabric.link_bps
        ports = np.repeat(np.maximum(out.host_up[:, src[m]], out.host_down[:, dst[m]]).T, S, axis=1) \
            * 8 / fabric.host_bps
        cost = np.where(live[m], np.maximum(links, ports) + tie[m], np.inf)
        # the k least-loaded paths, taken plane by plane (each plane's cheapest, then each plane's second...)
        # so that a flow's parts share its NIC ports evenly; dead paths never
        pick = _by_plane(cost.reshape(len(m), P, S), k[m])
        kmax = pick.shape[1]
        rr, cc = np.nonzero(np.arange(kmax)[None, :] < k[m][:, None])
        _place(out, a[m][rr], b[m][rr], src[m][rr], dst[m][rr], pick[rr, cc], part[m][rr], S)
    return out


@dataclass
class Iteration:
    """One iteration under a scheme: its time (sum of its steps'), and the bytes each link carried."""

    time: float
    loads: Loads


def iteration(vs: list[Variant], scheme: Scheme, fabric: Fabric, failed: Failed) -> Iteration:
    total = Loads.zero(fabric)
    time = 0.0
    for v in vs:
        step = step_loads(v, scheme, fabric, failed)
        time += step.time(fabric) * v.repeat
        total.add(step, v.repeat)
    return Iteration(time, total)


def per_qp(scheme: Scheme) -> bool:
    """Whether the scheme's path or plane follows the workload's QPs (else it splits flows itself)."""
    return scheme in _PER_QP
