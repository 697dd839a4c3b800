"""Every project under tests/projects/ (the seed examples and the valid corpus) checks without errors:
parse, configuration and semantic analysis (partition-safety warnings are allowed, and so are the
CCL1307 warnings that name an ESP adapter property meaning nothing here, with the reason; not an
adapter property the checker does not know)."""
import io
import json
from pathlib import Path

import pytest

from ccl.cli.main import main

PROJECTS = Path(__file__).parent / "projects"
FILES = sorted(PROJECTS.rglob("*.ccl"))


def test_corpus_is_large_enough():
    valid = [f for f in FILES if f.parent.name == "valid"]
    assert len(valid) >= 30


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(PROJECTS)) for f in FILES])
def test_project_checks_without_errors(path):
    out = io.StringIO()
    code = main(["check", "--format", "json", str(path)], out, io.StringIO())
    diagnostics = json.loads(out.getvalue())
    assert [d for d in diagnostics if d["severity"] == "error"] == []
    assert all(d["code"].startswith("CCL3")
               or d["code"] == "CCL1307" and "has no meaning on Spark" in d["message"]
               for d in diagnostics), diagnostics
    assert code == 0


def test_seed_examples_get_the_warnings_the_guidelines_predict():
    expected = {
        "hash_maxprice.ccl": ["CCL3002"],             # HASH(isin), GROUP BY upper(left(isin, 1))
        "roundrobin_tradewindow.ccl": [],             # ROUNDROBIN rotates the window's keys
        "eventcache_example1.ccl": [],                # 10 events per bucket, keyed by the hash column
        "flex_keycache_example2.ccl": ["CCL3007"],    # keyCache on Symbol2 under HASH(Symbol)
        "hash_vwap_broadcast.ccl": [],
        "custom_maxprice.ccl": ["CCL3002"],           # reads isin, GROUP BY upper(left(isin, 1)): 'a', 'A' split
        "custom_vwap_two_inputs.ccl": [],
    }
    for name, codes in expected.items():
        out = io.StringIO()
        main(["check", "--format", "json", str(PROJECTS / "seeds" / name)], out, io.StringIO())
        assert [d["code"] for d in json.loads(out.getvalue())] == codes, name
