"""controller.workload: each collective's steps do what the collective promises, the transfers carry
every byte once, QP scaling splits or rotates as defined, and dependencies follow NCCL's step order."""

from __future__ import annotations

import pytest

from controller.model.topology import build
from controller.workload import (COLLECTIVES, CollectiveError, PlacementError, Workload, bus_factor, chunk_span, grid,
                                 patterns, place, schedule, step_count, step_flows)


def _run(kind: str, n: int) -> list[list[set[int]]]:
    """Simulate the collective on contributions: have[rank][chunk] = ranks whose data that chunk holds."""
    if kind == "allgather":
        have = [[{r} if c == r else set() for c in range(n)] for r in range(n)]
    elif kind == "alltoall":
        have = [[set() for _ in range(n)] for _ in range(n)]
    else:
        have = [[{r} for _ in range(n)] for r in range(n)]
    reduce_steps = {"allreduce": n - 1, "reducescatter": n - 1, "allreduce_hd": n.bit_length() - 1}.get(kind, 0)
    for step in range(step_count(kind, n)):  # type: ignore[arg-type]
        sent = [(f, [set(have[f.src][c]) for c in range(f.chunk, f.chunk + f.chunks)])
                for f in step_flows(kind, n, step)]  # type: ignore[arg-type]
        for f, data in sent:
            for c, d in zip(range(f.chunk, f.chunk + f.chunks), data):
                if kind == "alltoall":
                    have[f.dst][f.src] |= {f.src} if c == f.dst else set()
                elif step < reduce_steps:
                    have[f.dst][c] |= d
                else:
                    have[f.dst][c] = d
    return have


@pytest.mark.parametrize("kind,n", [("allreduce", 2), ("allreduce", 5), ("allreduce_hd", 2), ("allreduce_hd", 8)])
def test_allreduce_leaves_every_chunk_reduced_over_all_ranks_on_every_rank(kind: str, n: int) -> None:
    assert _run(kind, n) == [[set(range(n))] * n] * n


def test_reducescatter_leaves_rank_r_with_chunk_r_reduced() -> None:
    have = _run("reducescatter", 5)
    assert [have[r][r] for r in range(5)] == [set(range(5))] * 5


def test_allgather_gives_every_rank_every_ranks_chunk() -> None:
    assert _run("allgather", 4) == [[{c} for c in range(4)]] * 4


def test_alltoall_delivers_block_d_of_every_rank_to_rank_d() -> None:
    flows = step_flows("alltoall", 3, 0)
    assert sorted((f.src, f.dst, f.chunk) for f in flows) == [(0, 1, 1), (0, 2, 2), (1, 0, 0), (1, 2, 2), (2, 0, 0),
                                                             (2, 1, 1)]


def test_ring_and_halving_doubling_steps() -> None:
    assert [(f.src, f.dst, f.chunk) for f in step_flows("allreduce", 3, 0)] == [(0, 1, 0), (1, 2, 1), (2, 0, 2)]
    # all-gather phase of a 3-rank ring: rank r holds chunk r+1 reduced and passes it on
    assert [(f.src, f.dst, f.chunk) for f in step_flows("allreduce", 3, 2)] == [(0, 1, 1), (1, 2, 2), (2, 0, 0)]
    assert [(f.src, f.dst, f.chunk, f.chunks) for f in step_flows("allreduce_hd", 4, 0)] == [
        (0, 2, 2, 2), (1, 3, 2, 2), (2, 0, 0, 2), (3, 1, 0, 2)]
    assert [(f.src, f.dst, f.chunk, f.chunks) for f in step_flows("allreduce_hd", 4, 3)] == [
        (0, 2, 0, 2), (1, 3, 0, 2), (2, 0, 2, 2), (3, 1, 2, 2)]


@pytest.mark.parametrize("kind", COLLECTIVES)
def test_patterns_move_the_same_bytes_as_the_steps(kind: str) -> None:
    n = 8
    want = sorted((f.src, f.dst, f.chunks) for s in range(step_count(kind, n)) for f in step_flows(kind, n, s))
    got = sorted((int(a), int(b), int(c)) for p in patterns(kind, n) for _ in range(p.repeat)
                 for a, b, c in zip(p.src, p.dst, p.chunks))
    assert got == want


@pytest.mark.parametrize("kind", COLLECTIVES)
def test_each_rank_receives_bus_factor_times_size_per_iteration(kind: str) -> None:
    n, size = 4, 4000
    s = schedule(Workload(kind, size, iterations=2, qps=3, strategy="split"), grid(1, 2, 2, "packed", n))  # type: ignore[arg-type]
    assert [s.bytes_to(r) for r in range(n)] == [2 * bus_factor(kind, n) * size] * n  # type: ignore[arg-type]


def test_chunks_of_an_uneven_size() -> None:
    assert [chunk_span(10, 4, c) for c in range(4)] == [(0, 3), (3, 3), (6, 2), (8, 2)]
    assert chunk_span(10, 4, 1, 2) == (3, 5)


def test_split_cuts_each_message_over_every_qp() -> None:
    s = schedule(Workload("allgather", 30, qps=3, strategy="split", qp_base=0x200), grid(2, 3, 1, "packed", 3))
    first = s.step_transfers(0, 0)
    assert [(t.src, t.dst, t.offset, t.bytes, t.qp, t.part, t.plane, t.sport) for t in first[:3]] == [
        (0, 1, 0, 4, 0x200, 0, 0, 0xC200), (0, 1, 4, 3, 0x201, 1, 1, 0xC201), (0, 1, 7, 3, 0x202, 2, 0, 0xC202)]


def test_round_robin_posts_each_message_whole_to_the_next_qp() -> None:
    s = schedule(Workload("allreduce", 300, iterations=2, warmup=1, qps=4, sport=49152), grid(1, 3, 1, "packed", 3))
    sent = [(t.iteration, t.step, t.bytes, t.qp_index, t.message, t.sport) for t in s.transfers if t.src == 0]
    assert sent == [(it, st, 100, (it * 4 + st) % 4, it * 4 + st, 49152) for it in range(3) for st in range(4)]
    assert [t.warmup for t in s.transfers if t.src == 0] == [True] * 4 + [False] * 8


def test_a_step_waits_for_everything_its_rank_sent_and_received_the_step_before() -> None:
    s = schedule(Workload("allreduce", 30, iterations=2), grid(1, 3, 1, "packed", 3))
    ids = {(t.iteration, t.step, t.src): t.id for t in s.transfers}
    assert s.transfers[ids[0, 0, 1]].after == ()
    # rank 1 at step 1 waits for its own send of step 0 (1->2) and the chunk it received (0->1)
    assert s.transfers[ids[0, 1, 1]].after == tuple(sorted((ids[0, 0, 0], ids[0, 0, 1])))
    # the next iteration's first step follows the rank's last step of this one
    assert s.transfers[ids[1, 0, 2]].after == tuple(sorted((ids[0, 3, 1], ids[0, 3, 2])))


def test_alltoall_iterations_wait_for_every_peer() -> None:
    s = schedule(Workload("alltoall", 90, iterations=2, qps=2, strategy="split"), grid(1, 3, 1, "packed", 3))
    second = [t for t in s.transfers if t.iteration == 1 and t.src == 0]
    first_ids = {t.id for t in s.transfers if t.iteration == 0 and 0 in (t.src, t.dst)}
    assert len(first_ids) == 8 and all(set(t.after) == first_ids for t in second)


def test_placements_on_a_topology() -> None:
    topo = build(2, 2, 3, 2)
    assert place(topo, "packed", 4).hosts == ("h0", "h1", "h2", "h3")
    assert place(topo, "spread", 4).hosts == ("h0", "h2", "h4", "h1")
    assert place(topo, "uneven").hosts == ("h0", "h2", "h4")
    p = place(topo, "h5,h0")
    assert (p.hosts, p.leaves, p.slots, p.planes) == (("h5", "h0"), (2, 0), (1, 0), 2)


@pytest.mark.parametrize("call,message", [
    (lambda: place(build(1, 2, 3, 2), "uneven", 4), "placement uneven has room for 3 ranks"),
    (lambda: place(build(1, 2, 3, 2), "h0,h9"), "host 'h9' is not in topology"),
    (lambda: place(build(1, 2, 3, 2), "h1,h1"), "host h1 holds two ranks"),
    (lambda: grid(1, 2, 2, "h0,x1", 2), "placement host 'x1' is not h0..h3"),
    (lambda: schedule(Workload("allreduce_hd", 8), grid(1, 3, 2, "packed", 6)), "power-of-two number of ranks, got 6"),
    (lambda: Workload("broadcast", 8), "collective 'broadcast' is not one of"),  # type: ignore[arg-type]
    (lambda: Workload("allreduce", 0), "size must be 1 byte to 1 TiB, got 0"),
    (lambda: Workload("allreduce", 8, qps=0), "QPs per connection must be 1 to 256, got 0"),
    (lambda: Workload("allreduce", 8, strategy="spray"), "QP strategy 'spray' is not one of split, round_robin"),  # type: ignore[arg-type]
])
def test_bad_input_is_one_line(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((CollectiveError, PlacementError)) as e:
        call()
    assert message in str(e.value) and "\n" not in str(e.value)
