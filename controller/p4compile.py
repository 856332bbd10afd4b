"""Deprecated alias: `python3 -m controller.p4compile` runs `python3 -m controller.programs.p4compile`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("controller.programs.p4compile", run_name="__main__", alter_sys=True)
