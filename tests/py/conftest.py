import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("TERN_SHARED", ROOT.parent / "shared"))
TERN = pathlib.Path(os.environ.get("TERN_BIN", ROOT / "build" / "tern"))


@pytest.fixture(scope="session")
def tern_bin():
    if not TERN.exists():
        pytest.fail(f"{TERN} is missing: run make first")
    return str(TERN)
