"""Training collectives as a workload (pure: no I/O): ranks placed on hosts, the collective's steps as
transfers with explicit dependencies, delivery checks, job-level metrics and the ideal completion time.

Layering: imports controller.model only; controller.analysis and the labs build on it."""

from controller.workload.collectives import COLLECTIVES, NAMES, Collective, CollectiveError, Flow, Pattern, \
    bus_factor, chunk_span, patterns, step_count, step_flows
from controller.workload.delivery import Receipt, Record, check_delivery, check_dependencies, payload
from controller.workload.ideal import Rates, ideal_time
from controller.workload.placement import PLACEMENTS, Placement, PlacementError, Rank, grid, on_hosts, place
from controller.workload.schedule import STRATEGIES, Schedule, Strategy, Transfer, Workload, schedule

__all__ = ["COLLECTIVES", "NAMES", "PLACEMENTS", "STRATEGIES", "Collective", "CollectiveError", "Flow", "Pattern",
           "Placement", "PlacementError", "Rank", "Rates", "Receipt", "Record", "Schedule", "Strategy", "Transfer",
           "Workload", "bus_factor", "check_delivery", "check_dependencies", "chunk_span", "grid", "ideal_time",
           "on_hosts", "patterns", "payload", "place", "schedule", "step_count", "step_flows"]
