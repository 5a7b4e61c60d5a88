"""Shared paths for the calibration tests.

The real XL330 recordings live in ``../shared/data/bam-xl330`` beside the
repository.  A test that needs them fails (never skips) when they are
missing, naming the path: a run that silently skipped them would claim a
fit it never made.  ``SERVOLOOP_SHARED`` points elsewhere (a worktree).
"""

import os
from pathlib import Path

import pytest

_SHARED = Path(os.environ.get("SERVOLOOP_SHARED", Path(__file__).resolve().parents[4] / "shared"))
BAM_DIR = _SHARED / "data" / "bam-xl330"


@pytest.fixture
def bam_dir():
    if not BAM_DIR.exists():
        pytest.fail(f"the real XL330 recordings are missing: expected them at {BAM_DIR} "
                    "(../shared/data beside the repository, or set SERVOLOOP_SHARED)")
    return BAM_DIR


@pytest.fixture
def bam_logs(bam_dir):
    logs = sorted(bam_dir.glob("*.json"))
    if len(logs) < 8:
        pytest.fail(f"{BAM_DIR}: expected the 8 XL330 recordings, found {len(logs)}")
    return logs
