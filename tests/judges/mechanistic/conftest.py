from __future__ import annotations

import pytest

from tests.judges.mechanistic.gsm8k import gsm8k_rows


@pytest.fixture(scope="module")
def rows():
    return gsm8k_rows()
