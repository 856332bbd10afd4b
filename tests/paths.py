"""Where the tests find the repository and their data, wherever in tests/ a test module sits."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UNIT_DATA = REPO / "tests" / "unit" / "data"
LAB_YAML = UNIT_DATA / "two_plane_lab.yaml"
