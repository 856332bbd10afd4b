"""Deprecated alias: `python3 -m controller.cli` runs `python3 -m fabricctl` (the CLI is the fabricctl package now).

It names the module to run instead of importing it, so the controller library imports nothing of the CLI above it.
"""

import runpy

if __name__ == "__main__":
    runpy.run_module("fabricctl", run_name="__main__", alter_sys=True)
