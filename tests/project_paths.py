"""Where the tests find the project and its shared data folder (resolved from this checkout)."""

from pathlib import Path

from openpert.config.project import shared_data_dir

ROOT = Path(__file__).resolve().parents[1]
#: ``$OPENPERT_SHARED_DATA``, else ``../shared/data`` beside this checkout.
SHARED_DATA = shared_data_dir(ROOT)
#: Fixture projects and tasks of the harness tests.
FIXTURES = ROOT / "tests" / "fixtures"
