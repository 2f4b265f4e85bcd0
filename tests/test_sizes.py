"""The table of test sizes (tests/support/sizes.py) is the one docs/testing.md shows, and each of
its rows names a test that exists and reads its size."""

from __future__ import annotations

import re
from pathlib import Path

from sizes import SIZES, table

ROOT = Path(__file__).resolve().parents[1]


def test_docs_testing_shows_the_table_of_sizes():
    assert table() in (ROOT / "docs" / "testing.md").read_text()


def test_every_sized_test_exists_and_reads_its_size():
    for name, sized in SIZES.items():
        path, test = sized.test.split("::")
        source = (ROOT / path).read_text()
        assert re.search(rf"^def {re.escape(test.split('[')[0])}\(", source, re.MULTILINE), sized.test
        assert f'"{name}"' in source and "size(" in source, f"{path} does not read size {name!r}"
        assert all(value > 0 for value in (*sized.ci.values(), *sized.acceptance.values())), name
        assert all(sized.ci[key] <= sized.acceptance[key] for key in sized.ci), f"{name}: CI larger than acceptance"
