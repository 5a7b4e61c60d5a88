"""Shared paths for the calibration tests."""

from pathlib import Path

import pytest

BAM_DIR = Path(__file__).resolve().parents[4] / "shared" / "data" / "bam-xl330"


@pytest.fixture
def bam_dir():
    if not BAM_DIR.exists():
        pytest.skip(f"BAM XL330 logs not found at {BAM_DIR}")
    return BAM_DIR


@pytest.fixture
def bam_logs(bam_dir):
    return sorted(bam_dir.glob("*.json"))
