"""Many switches at once: connect, ensure pipelines and reconcile in parallel, one result per switch."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Generic, Iterable, Mapping, TypeVar

from controller.plan.entries import Entity
from controller.runtime.p4rt import SwitchConnection
from controller.runtime.reconcile import apply
from controller.plan.delta import Delta
from controller.programs.toolchain import Artifacts

T = TypeVar("T")

# Called once per switch as it finishes: (switch name, its result or None, its error or None).
Progress = Callable[[str, object, BaseException | None], None]


@dataclass
class FabricResult(Generic[T]):
    """Per-switch results and per-switch errors of one fabric-wide operation."""

    results: dict[str, T] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_first(self) -> None:
        """Raise the error of the first failed switch (by name), if any."""
        for name in sorted(self.errors):
            raise self.errors[name]

    def summary(self) -> str:
        failed = "; ".join(f"{n}: {e}" for n, e in sorted(self.errors.items()))
        return f"{len(self.results)} ok, {len(self.errors)} failed" + (f" ({failed})" if failed else "")


_WAKE_S = 0.2  # how often the waiting main thread wakes (to take a Ctrl-C)


class FabricClient:
    """SwitchConnections by switch name; operations run in parallel and never hide one switch's failure."""

    def __init__(self, connections: Iterable[SwitchConnection], max_workers: int = 16) -> None:
        self.switches: dict[str, SwitchConnection] = {}
        for conn in connections:
            if conn.name in self.switches:
                raise ValueError(f"two connections for switch {conn.name}")
            self.switches[conn.name] = conn
        self.max_workers = max_workers

    def run(
        self,
        fn: Callable[[SwitchConnection], T],
        names: Iterable[str] | None = None,
        progress: Progress | None = None,
    ) -> FabricResult[T]:
        """fn(conn) on each named switch (all if None) in a thread pool; errors are collected, not raised."""
        chosen = sorted(self.switches) if names is None else list(names)
        unknown = [n for n in chosen if n not in self.switches]
        if unknown:
            raise KeyError(f"unknown switch(es): {', '.join(unknown)}")
        outcome: FabricResult[T] = FabricResult()
        if not chosen:
            return outcome
        pool = ThreadPoolExecutor(max_workers=min(self.max_workers, len(chosen)))
        try:
            pending = {pool.submit(fn, self.switches[n]): n for n in chosen}
            order = {n: i for i, n in enumerate(chosen)}
            left = set(pending)
            while left:
                # Short waits: Ctrl-C's KeyboardInterrupt is raised only when this (main) thread runs, and a
                # SIGINT the kernel hands to a gRPC thread does not wake a wait without a timeout.
                done, left = wait(left, timeout=_WAKE_S, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: order[pending[f]]):
                    name = pending[future]
                    error = future.exception()
                    if error is None:
                        outcome.results[name] = future.result()
                    else:
                        outcome.errors[name] = error
                    if progress is not None:
                        progress(name, outcome.results.get(name), error)
        except BaseException:
            # Ctrl-C (or any error of ours): do not wait for the switch calls in flight (a connect waits
            # up to its timeout); the caller ends or closes the connections, which ends them.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return outcome

    def connect_all(self, progress: Progress | None = None) -> FabricResult[bool]:
        """Connect every switch; the result says whether we are primary."""
        return self.run(lambda c: c.connect(), progress=progress)

    def ensure_pipeline_all(
        self, artifacts: Artifacts | Mapping[str, Artifacts], progress: Progress | None = None
    ) -> FabricResult[bool]:
        """ensure_pipeline on every switch (one program for all, or one per switch name); True where set."""
        def one(conn: SwitchConnection) -> bool:
            chosen = artifacts if isinstance(artifacts, Artifacts) else artifacts[conn.name]
            return conn.ensure_pipeline(chosen)

        names = None if isinstance(artifacts, Artifacts) else list(artifacts)
        return self.run(one, names, progress)

    def reconcile_all(
        self, desired: Mapping[str, Iterable[Entity]], progress: Progress | None = None, dry_run: bool = False
    ) -> FabricResult[Delta]:
        """Reconcile each switch named in `desired` to its entities; the result is the Delta applied."""
        return self.run(lambda c: apply(c, desired[c.name], dry_run=dry_run), list(desired), progress)

    def close_all(self) -> None:
        for conn in self.switches.values():
            conn.close()

    def __enter__(self) -> "FabricClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()
