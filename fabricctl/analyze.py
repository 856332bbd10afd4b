"""`fabricctl analyze` and `fabricctl topo draw`: the analysis engine's command line (registered in fabricctl/main.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from controller import exitcodes
from controller.analysis.design import KINDS, Design, DesignError, Kind, Rates, from_topology, parse_design, parse_rate
from controller.exitcodes import OpError
from fabricctl.options import Finite

EXAMPLES = """\b
Examples:
  fabricctl analyze --design 8x4x16x8 --gpus 64
  fabricctl analyze --design single=1x8x32x32 --compare mrc=8x8x32x32 --gpus 512 --plot cmp.png
  fabricctl --topology examples/two_plane_lab.yaml analyze --samples 2000 --json
  fabricctl analyze --design 2x4x8x4 --kind link --failures 1,4,8,16 --nic 1e6h --mttr 4
  fabricctl analyze --design 2x2x4x2 --engine controller   # reachability from failover.unreachable
"""


def _rates(link: str | None, t1: str | None, t0: str | None, nic: str | None, mttr: float) -> Rates:
    r = Rates(mttr=mttr)
    for kind, text in (("link", link), ("t1", t1), ("t0", t0), ("nic", nic)):
        if text is not None:
            r = r.with_rate(kind, parse_rate(text))  # type: ignore[arg-type]
    return r


def _failures(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise DesignError(f"--failures {text!r} is not a comma-separated list of counts (e.g. 1,2,4,8)") from None
    if not ks or len(ks) > 32 or any(k < 0 for k in ks):
        raise DesignError(f"--failures {text!r}: give 1 to 32 counts, none negative")
    return ks


@contextmanager
def _bar(total: int, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal (Monte Carlo runs can take a while)."""
    if not sys.stderr.isatty():
        yield lambda n: None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr, show_percent=True) as bar:
        yield bar.update


def _designs(ctx: click.Context, specs: Sequence[str]) -> list[Design]:
    if specs:
        return [parse_design(s) for s in specs]
    env = ctx.find_root().obj
    if env is None or getattr(env, "topology_file", None) is None:
        raise OpError("no design: give --design PLANESxT1xT0xHOSTS, or a topology (--topology FILE or FABRIC_TOPOLOGY)")
    return [from_topology(env.topo())]


def _check_plot(path: Path | None) -> None:
    """Before any work: OpError (bad input) unless a plot can be written to `path` (its folder, matplotlib)."""
    if path is None:
        return
    from controller.analysis.plot import PlotError, check_path, require

    try:
        check_path(path)
        require()
    except PlotError as e:
        raise OpError(str(e), exitcodes.BAD_INPUT) from None


@click.group("analyze", epilog=EXAMPLES, invoke_without_command=True)
@click.option("--design", "--compare", "designs", multiple=True, metavar="[NAME=]PxT1xT0xH",
              help="A design: planes x T1 per plane x T0 per plane x hosts per T0 (repeat to compare designs "
                   "side by side). Default: the topology file's design.")
@click.option("--gpus", type=int, default=None, help="GPUs of the job (one host, i.e. one NIC group, each; "
                                                       "packed from host 0) [default: every host].")
@click.option("--samples", type=click.IntRange(1, 1_000_000), default=400, show_default=True,
              help="Monte Carlo samples per estimate.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the Monte Carlo (equal seeds, equal numbers).")
@click.option("--failures", "failures_text", default=None, metavar="K,K,...",
              help="Failure counts for the P(job cut after k failures) curve [default: 1,2,4,...,32, those the design has].")
@click.option("--kind", type=click.Choice(KINDS), default=None,
              help="Fail only this kind in the curve and first-cut runs [default: kinds mixed by their rates].")
@click.option("--link", metavar="RATE", help="T0-T1 link rate: MTBF hours (2.4e6h) or failures per hour (4e-7/h).")
@click.option("--t1", metavar="RATE", help="T1 switch rate.")
@click.option("--t0", metavar="RATE", help="T0 switch rate.")
@click.option("--nic", metavar="RATE", help="NIC port rate (NIC and host cable).")
@click.option("--mttr", type=Finite(min=0, min_open=True, max=1e6), default=8.0, show_default=True,
              help="Mean time to repair, hours.")
@click.option("--repair-events", type=click.IntRange(0, 10_000_000), default=20_000, show_default=True,
              help="Events of the with-repair simulation of the job (0: closed form only).")
@click.option("--engine", type=click.Choice(["fast", "controller"]), default="fast", show_default=True,
              help="Reachability: the analysis' own path math, or the controller's failover code (slow; tests prove them equal).")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE.png",
              help="Write a PNG: P(job cut) vs failures, and the job's survival without repair, per design.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def analyze(ctx: click.Context, designs: tuple[str, ...], gpus: int | None, samples: int, seed: int,
            failures_text: str, kind: Kind | None, link: str | None, t1: str | None, t0: str | None, nic: str | None,
            mttr: float, repair_events: int, engine: str, plot_file: Path | None, as_json: bool) -> None:
    """How much failure a fabric design endures before some GPU pair loses every path.

    For each design: the failures of each kind it endures with certainty (worst case); for a
    given host pair, P(cut) in one plane and in every plane with failure rates and repair
    (closed form), the expected failures to cut it, its mean time to cut and interruption rate;
    the expected capacity lost; and for a job of --gpus GPUs, P(cut) after k failures and the
    failures and hours to its first interruption with no repair (Monte Carlo, 95% intervals),
    and its interruption rate with repair (closed form, and a simulation). Default rates come
    from the Llama 3 report's 54-day interruption table (docs/analysis.md says how).

    `fabricctl analyze collective --help`: what a hash, a spray policy or failures cost a training
    collective at fabric scale.
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        chosen = _designs(ctx, designs)
        rates = _rates(link, t1, t0, nic, mttr)
        from controller.analysis.report import Settings, analyze as run, check, units

        ks = None if failures_text is None else _failures(failures_text)
        settings = Settings(rates, gpus, samples, seed, ks, kind, repair_events, engine)
        names = [d.name for d in chosen]
        if len(set(names)) != len(names):
            raise DesignError("two designs share a name: name them, e.g. --design a=8x4x16x8")
        for d in chosen:
            check(d, settings)
        _check_plot(plot_file)
        results = []
        with _bar(units(settings) * len(chosen), "analyze") as tick:
            for d in chosen:
                results.append(run(d, settings, tick))
    except DesignError as e:
        raise OpError(str(e), exitcodes.BAD_INPUT) from None
    if plot_file is not None:
        from controller.analysis.plot import PlotError, plot_results

        try:
            plot_file = plot_results(results, plot_file)
        except PlotError as e:
            raise OpError(str(e), exitcodes.BAD_INPUT) from None
    if as_json:
        doc: dict[str, Any] = {"settings": {"samples": samples, "seed": seed, "kind": kind or "mix",
                                            "engine": engine, "repair_events": repair_events},
                               "designs": results}
        if plot_file is not None:
            doc["plot"] = str(plot_file)
        click.echo(json.dumps(doc, indent=2))
        return
    from controller.analysis.table import render

    click.echo(render(results))
    if plot_file is not None:
        click.echo(f"plot: {plot_file}")


@click.command("draw")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              metavar="FILE.png|FILE.svg", help="Where to write the drawing (format by extension).")
@click.option("--no-hosts", is_flag=True, help="Leave the hosts out (large fabrics).")
@click.option("--healthy", is_flag=True, help="Draw no failures (ignore the state file).")
@click.pass_context
def topo_draw(ctx: click.Context, out_file: Path, no_hosts: bool, healthy: bool) -> None:
    """Draw the topology: planes side by side (T1s on top, T0s below, hosts at the bottom), the
    failures of the state file in red (dashed links, crossed switches and NIC ports).

    \b
    Examples:
      fabricctl --topology examples/two_plane_lab.yaml topo draw --out fabric.png
      fabricctl fail link p0-t0-0 p0-t1-1 --no-apply && fabricctl topo draw --out f.svg
    """
    env = ctx.find_root().obj
    topo = env.topo()
    failures = frozenset() if healthy else env.failures()
    from controller.analysis.draw import DrawError, draw

    try:
        path = draw(topo, failures, out_file, hosts=not no_hosts)
    except DrawError as e:
        raise OpError(str(e), exitcodes.BAD_INPUT) from None
    click.echo(f"drew {topo.name}: {len(topo.switches)} switches, {len(failures)} failures marked -> {path}")


COLLECTIVE_EXAMPLES = """\\b
Examples:
  fabricctl --topology examples/two_plane_lab.yaml analyze collective --size 1M --qps 2
  fabricctl analyze collective --design 1x8x16x8 --placement spread --qps 4 --sport 49152 --schemes ecmp,eecmp,pin
  fabricctl analyze collective --design 2x2x2x4 --size 128K --placement h0,h4,h1,h5 --qps 8 --strategy split --sport-rule ev --schemes ecmp,eecmp
  fabricctl analyze collective --design 8x256x512x256 --schemes host_spray   # MRC scale, 131,072 ranks
  fabricctl analyze collective --design 2x4x8x4 --failures 2 --draws 200 --png slow.png
  fabricctl analyze collective --design 8x16x32x16 --collective alltoall --ranks 64 --json
"""


@analyze.command("collective", epilog=COLLECTIVE_EXAMPLES)
@click.option("--design", "design_text", metavar="PxT1xT0xH",
              help="Planes x T1 per plane x T0 per plane x hosts per T0 [default: the topology file's design].")
@click.option("--collective", "kind", type=click.Choice(["allreduce", "allgather", "reducescatter", "alltoall",
                                                          "allreduce_hd"]), default="allreduce", show_default=True,
              help="Ring AllReduce / AllGather / ReduceScatter, one-step all-to-all, halving-doubling AllReduce.")
@click.option("--size", "size_text", default="64M", show_default=True, metavar="BYTES",
              help="nccl-tests' size: each rank's AllReduce buffer, the AllGather output, the ReduceScatter input, "
                   "each rank's all-to-all send buffer (4096, 256K, 1M, 1G).")
@click.option("--ranks", type=click.IntRange(2, 1 << 20), default=None,
              help="Ranks of the job [default: every host the placement can hold].")
@click.option("--placement", default="packed", show_default=True, metavar="packed|spread|uneven|h0,h3,...",
              help="packed: whole leaves from h0; spread: rank i on leaf i mod leaves; uneven: one host of each "
                   "leaf's pair (slots 0, 2, ...); or the hosts in rank order.")
@click.option("--qps", type=click.IntRange(1, 256), default=1, show_default=True, help="QPs per connection.")
@click.option("--strategy", type=click.Choice(["split", "round_robin"]), default="round_robin", show_default=True,
              help="QP scaling: split every message over all QPs, or post each message whole to the next QP.")
@click.option("--sport", type=click.IntRange(0, 0xFFFF), default=None,
              help="One UDP source port for every QP (a NIC that does not spread QPs over ports) "
                   "[default: 0xC000 | QP number, one per QP].")
@click.option("--sport-rule", type=click.Choice(["qp", "ev", "qp-crc"]), default="qp", show_default=True,
              help="How each QP's UDP source port is chosen: qp (0xC000 | QP number); ev (the lab's leaf "
                   "schemes: the port of the plane's EV, one per host pair and plane); qp-crc (the lab's per-QP "
                   "port on the kernel: 0xC000 | crc32 of the QP number).")
@click.option("--hash-key", type=click.IntRange(0, (1 << 63) - 1), default=None, metavar="N",
              help="Hash ecmp and eecmp with a random hash keyed with N instead of bmv2's crc32: Linux's multipath "
                   "hash (the kernel lab) is keyed at random at boot; vary N for its distribution.")
@click.option("--schemes", "schemes_text", default=",".join(("ecmp", "eecmp", "pin", "leaf_spray", "host_spray",
                                                             "ethereal")), show_default=True,
              help="Path selection schemes to compare.")
@click.option("--dead-link", "dead_links", multiple=True, metavar="PLANE,LEAF,SPINE",
              help="A leaf-spine link down from the start (both ways), e.g. 0,0,0; repeat for more. Slowdowns stay "
                   "against the healthy fabric's ideal.")
@click.option("--failures", type=click.IntRange(0, 1 << 20), default=0, show_default=True,
              help="Random failures per draw (0: none).")
@click.option("--kind", "failure_kind", type=click.Choice(["link", "t1"]), default="link", show_default=True,
              help="What fails: leaf-spine links of the job's leaves, or T1 switches.")
@click.option("--draws", type=click.IntRange(1, 100_000), default=20, show_default=True, help="Failure draws.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the draws.")
@click.option("--host-rate", default="100", show_default=True, metavar="GBPS", help="Host NIC port rate, Gb/s.")
@click.option("--link-rate", default="100", show_default=True, metavar="GBPS", help="Leaf-spine link rate, Gb/s.")
@click.option("--png", "png_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE.png",
              help="Write a PNG: slowdown per scheme (healthy and under failures) and per-link load histograms.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
@click.pass_context
def collective(ctx: click.Context, design_text: str | None, kind: str, size_text: str, ranks: int | None,
               placement: str, qps: int, strategy: str, sport: int | None, sport_rule: str, hash_key: int | None, schemes_text: str, dead_links: tuple[str, ...], failures: int,
               failure_kind: str, draws: int, seed: int, host_rate: str, link_rate: str, png_file: Path | None,
               as_json: bool) -> None:
    """What a hash, a spray policy or failures cost a training collective, at any fabric size.

    For each path-selection scheme, every link's load over one iteration of the collective, its
    predicted completion time (steps in sequence; a step lasts as long as its most loaded link
    needs), the slowdown against the ideal (the same with a perfect split over every path), the
    bus bandwidth (nccl-tests' definition) and the busiest leaf-spine link against the mean. Schemes:
    ecmp and eecmp hash with eecmp_qp_hash.p4's own crc32 and fields (5-tuple; plus the destination
    QP) over the hosts' addresses, QP numbers and UDP ports; pin takes the destination host's slot;
    leaf_spray (srv6_spray PACKET) splits evenly over the spines of the QP's plane; host_spray
    (endpoint EVs) over every plane and spine; ethereal splits each flow into equal single-path parts
    on the least-loaded paths. With --failures, the same over --draws random draws (median, p99, max;
    'cut' counts draws that left some flow no path). docs/collectives.md defines every number.
    """
    from controller.analysis.collective import Settings, analyze as run, check, parse_link, parse_rate_gbps, \
        parse_schemes, parse_size, plot, render, units
    from controller.analysis.fabricload import LoadError
    from controller.workload import CollectiveError, Workload

    try:
        if design_text is not None:
            design = parse_design(design_text)
        else:
            design = _designs(ctx, ())[0]
        workload = Workload(kind, parse_size(size_text), qps=qps, strategy=strategy, sport=sport)  # type: ignore[arg-type]
        settings = Settings(design, workload, placement.strip(), ranks, parse_schemes(schemes_text), failures,
                            failure_kind, draws, seed, parse_rate_gbps(host_rate, "--host-rate"),
                            parse_rate_gbps(link_rate, "--link-rate"), sport_rule,
                            hash_key, tuple(parse_link(t) for t in dead_links))
        check(settings)
        _check_plot(png_file)
        with _bar(units(settings), "analyze collective") as tick:
            result = run(settings, tick)
    except (DesignError, LoadError, CollectiveError) as e:
        raise OpError(str(e), exitcodes.BAD_INPUT) from None
    if png_file is not None:
        plot(result, png_file)
    if as_json:
        doc = result.to_json()
        if png_file is not None:
            doc["png"] = str(png_file)
        click.echo(json.dumps(doc, indent=2, default=_json_number))
        return
    click.echo(render(result))
    if png_file is not None:
        click.echo(f"plot: {png_file}")


def _json_number(x: Any) -> Any:
    """numpy scalars as numbers; infinity (a cut) as null."""
    value = float(x)
    return value if value == value and abs(value) != float("inf") else None
