"""A checkpoint moved to another number of partition instances (ccl/plan/rescale.py decides,
runtime/rescale.py moves): resuming after the move gives the outputs of a run that had the new
count from the start; what would change results is refused, naming the element and the reason."""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re

import pytest

from ccl.plan.codec import PlanFormatError, move_from_json, move_to_json, plan_to_json
from ccl.plan.model import Move, Plan
from ccl.plan.planner import plan_project
from ccl.plan.rescale import rescale_moves, why_not_rescaled
from runtime.spark_hash import spark_pmod_hash
from tests.cli_runner import run as ccl
from tests.rescale_projects import FLEX_PROJECT, PROJECT
from tests.runner_e2e import run_project, write_rows


def _files(directory: str, batches: int) -> None:
    """``batches`` files of trades over 11 symbols, one file a batch (in name order)."""
    for b in range(batches):
        write_rows(os.path.join(directory, f"t{b}.csv"), ["TradeId", "Sym", "Qty"],
                   [(b * 40 + i, f"S{(b + i * 7) % 11}", i + b) for i in range(40)])


def _outputs(out) -> dict:
    return {"Recent": sorted((r["Sym"], r["TradeId"]) for r in out.rows("Recent")),
            "Totals": sorted((r["Sym"], r["Qty"], r["N"]) for r in out.rows("Totals"))}


def _plan(path: str, parts: int) -> Plan:
    plan, diags = plan_project(path, params={"PARTS": str(parts)})
    assert plan is not None, [str(d) for d in diags]
    return plan


def _json(moves: dict[str, Move]) -> dict[str, dict]:
    """The moves in the JSON form the journal holds (runtime/rescale.py ``RUN/rescale.json``)."""
    return {name: move_to_json(move) for name, move in moves.items()}


def _instances(run: str, element: str) -> set[int]:
    """The instances whose states the element's state files hold."""
    found: set[int] = set()
    directory = os.path.join(run, "state", element)
    for name in os.listdir(directory):
        if name.endswith(".pkl"):
            with open(os.path.join(directory, name), "rb") as f:
                found |= set(pickle.load(f))
    return found


@pytest.mark.parametrize("first,then", [(2, 3), (4, 2), (4, 7), (7, 2)])
def test_resumed_after_a_rescale_gives_the_outputs_of_the_new_count_from_the_start(
        spark, tmp_path, first, then):
    whole = tmp_path / "whole"
    _files(str(whole / "in"), 3)
    expected = _outputs(run_project(spark, whole, PROJECT, {"Trades": str(whole / "in")},
                                    params={"PARTS": str(then)}))
    split = tmp_path / "split"
    _files(str(split / "in"), 2)
    first_out = run_project(spark, split, PROJECT, {"Trades": str(split / "in")},
                            params={"PARTS": str(first)})
    assert first_out.stats("Totals")["instances"]  # (the aggregate ran partitioned)
    run = str(split / "run")
    assert _instances(run, "Recent") == {spark_pmod_hash([f"S{k}"], ["string"], first)
                                         for k in range(11)}
    code, out, err = ccl("rescale", run, "--param", f"PARTS={then}")
    assert code == 0, err
    assert f"Recent: {first} -> {then} instances" in out
    assert f"Totals: {first} -> {then} instances" in out
    # each symbol's rows in the instance Spark's hash gives it among the new count
    assert _instances(run, "Recent") == {spark_pmod_hash([f"S{k}"], ["string"], then)
                                         for k in range(11)}
    assert json.loads(open(os.path.join(run, "plan.json")).read())["parameters"]["PARTS"] == then
    assert not os.path.exists(os.path.join(run, "rescale.json"))
    _files(str(split / "in"), 3)  # a third file, run on the moved state
    got = run_project(spark, split, PROJECT, {"Trades": str(split / "in")},
                      params={"PARTS": str(then)})
    assert _outputs(got) == expected
    assert got.bad_records() == []  # (a key held by two instances would be a conflict)


def test_a_rescale_cut_short_is_finished_by_the_next_run(spark, tmp_path, monkeypatch):
    """A crash while the directories are swapped: the journal makes the next run finish the
    move before it compares plans."""
    import runtime.rescale as rs
    whole = tmp_path / "whole"
    _files(str(whole / "in"), 2)
    expected = _outputs(run_project(spark, whole, PROJECT, {"Trades": str(whole / "in")},
                                    params={"PARTS": "3"}))
    split = tmp_path / "split"
    _files(str(split / "in"), 1)
    run_project(spark, split, PROJECT, {"Trades": str(split / "in")}, params={"PARTS": "2"})
    run = str(split / "run")
    old, new = _plan(str(split / "p.ccl"), 2), _plan(str(split / "p.ccl"), 3)
    moves, refused = rescale_moves(old, new)
    assert refused == [] and set(moves) == {"Recent", "Totals"}
    swapped: list[str] = []
    real_swap = rs.swap_dir

    def crash_after_three(path: str) -> None:
        if len(swapped) == 3:  # the first element whole, the second not
            raise KeyboardInterrupt("killed")
        swapped.append(path)
        real_swap(path)
    monkeypatch.setattr(rs, "swap_dir", crash_after_three)
    with pytest.raises(KeyboardInterrupt):
        rs.rescale_run(run, old, new, moves)
    assert json.loads(open(os.path.join(run, "rescale.json")).read())["swapping"] is True
    monkeypatch.setattr(rs, "swap_dir", real_swap)
    _files(str(split / "in"), 2)
    got = run_project(spark, split, PROJECT, {"Trades": str(split / "in")}, params={"PARTS": "3"})
    assert _outputs(got) == expected
    assert not os.path.exists(os.path.join(run, "rescale.json"))


# --- refusals: the rule alone, without Spark ------------------------------------------------------

HEAD = """DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE INPUT WINDOW Names SCHEMA (Sym string, Name string) PRIMARY KEY (Sym);
"""

def _flex(declare: str, body: str) -> str:
    """A Flex over Trades partitioned HASH(Sym), with ``declare`` and the body of ON Trades."""
    return f"""CREATE FLEX F IN Trades OUT OUTPUT STREAM Seen SCHEMA (Sym string, N integer)
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
    BEGIN
        {declare}
        ON Trades {{ {body} }};
    END;"""


REFUSED = {
    "roundrobin": ("""CREATE OUTPUT WINDOW W PRIMARY KEY (Sym, TradeId) PARTITION BY Trades
        ROUNDROBIN PARTITIONS PARTS AS SELECT * FROM Trades;""", r"ROUNDROBIN"),
    "custom": ("""CREATE OUTPUT WINDOW W PRIMARY KEY (Sym, TradeId) PARTITION BY Trades
        { return length(Trades.Sym); } PARTITIONS PARTS AS SELECT * FROM Trades;""",
               r"custom SPLASH function"),
    "keep_rows": ("""CREATE OUTPUT WINDOW W PRIMARY KEY (Sym, TradeId) KEEP 3 ROWS
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS AS SELECT * FROM Trades;""",
                  r"KEEP 3 ROWS is counted per instance"),
    "keep_per_other": ("""CREATE OUTPUT WINDOW W PRIMARY KEY (Sym, TradeId) KEEP 3 ROWS PER (Qty)
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS AS SELECT * FROM Trades;""",
                       r"KEEP 3 ROWS is counted per instance"),
    "flex_counter": (_flex("DECLARE integer n := 0; END;",
                           "n := n + 1; output [Sym = Trades.Sym; N = n;];"),
                     r"its variable n is kept per instance \(a counter"),
    "flex_cache_other_key": (_flex("DECLARE eventCache(Trades[Qty], 5 events) c; END;",
                                   "output [Sym = Trades.Sym; N = count(c.Qty);];"),
                             r"its event cache c is keyed by \(Qty\), not by the hash columns"),
    "flex_dictionary_other_key": (_flex("DECLARE dictionary(integer, integer) byQty; END;",
                                        "byQty[Trades.Qty] := 1; "
                                        "output [Sym = Trades.Sym; N = byQty[Trades.Qty];];"),
                                  r"its dictionary byQty is used by another key"),
    "flex_keycache": (_flex("DECLARE eventCache(Trades[Sym], 5 events) c; END;",
                            "keyCache(c, [Sym = 'S1';|]); "
                            "output [Sym = Trades.Sym; N = count(c.Qty);];"),
                      r"its event cache c is moved to another bucket \(keyCache\)"),
    "join_not_on_the_hash_columns": ("""CREATE OUTPUT STREAM W
        PARTITION BY Trades HASH(Sym), BY Names HASH(Name) PARTITIONS PARTS
        AS SELECT t.TradeId TradeId, n.Name Name FROM Trades t INNER JOIN Names n
        ON t.Sym = n.Sym;""", r"ON does not equate the hash column Name of n with Sym of t"),
    "join_keeps_broadcast_rows": ("""CREATE INPUT WINDOW Pos SCHEMA (Sym string, Qty integer)
        PRIMARY KEY (Sym);
        CREATE OUTPUT WINDOW W PRIMARY KEY (Sym) PARTITION BY Pos HASH(Sym) PARTITIONS PARTS
        AS SELECT n.Sym Sym, n.Name Name, p.Qty Qty FROM Names n LEFT JOIN Pos p
        ON n.Sym = p.Sym;""", r"LEFT JOIN keeps the unmatched rows of broadcast inputs \(n\)"),
    "join_condition_not_only_equalities": ("""CREATE INPUT WINDOW Pos SCHEMA (Sym string,
        Qty integer) PRIMARY KEY (Sym);
        CREATE OUTPUT WINDOW W PRIMARY KEY (Sym) PARTITION BY Pos HASH(Sym) PARTITIONS PARTS
        AS SELECT p.Sym Sym, n.Name Name, p.Qty Qty FROM Pos p LEFT JOIN Names n
        ON p.Sym = n.Sym AND p.Qty > 1;""", r"ON terms besides column equalities"),
    "join_key_without_hash": ("""CREATE INPUT WINDOW Pos SCHEMA (Sym string, Qty integer,
        Id integer) PRIMARY KEY (Id);
        CREATE OUTPUT WINDOW W PRIMARY KEY (Id) PARTITION BY Pos HASH(Sym) PARTITIONS PARTS
        AS SELECT p.Id Id, p.Sym Sym, n.Name Name FROM Pos p INNER JOIN Names n
        ON p.Sym = n.Sym;""", r"PRIMARY KEY does not include the hash column Sym"),
    "group_without_hash": ("""CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
        AS SELECT t.Qty, count(*) N FROM Trades t GROUP BY t.Qty;""",
                           r"GROUP BY does not include the hash column Sym"),
    "engine_group_without_hash": ("""CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED
        PARTITION BY Names HASH(Sym) PARTITIONS PARTS
        AS SELECT n.Name, count(*) N FROM Names n GROUP BY n.Name;""",
                                  r"GROUP BY does not include the hash column Sym"),
    "join_group_without_hash": ("""CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED
        PARTITION BY Trades HASH(Sym), BY Names HASH(Sym) PARTITIONS PARTS
        AS SELECT n.Name, count(*) N FROM Trades t INNER JOIN Names n ON t.Sym = n.Sym
        GROUP BY n.Name;""", r"GROUP BY does not include the hash column Sym of a source every"),
    "join_group_by_a_null_extended_side": ("""CREATE INPUT WINDOW Pos SCHEMA (Sym string,
        Qty integer) PRIMARY KEY (Sym);
        CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED
        PARTITION BY Pos HASH(Sym), BY Names HASH(Sym) PARTITIONS PARTS
        AS SELECT p.Sym, count(*) N FROM Pos p RIGHT JOIN Names n ON p.Sym = n.Sym
        GROUP BY p.Sym;""", r"GROUP BY does not include the hash column Sym of a source every"),
    "join_aggregate_keep": ("""CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED KEEP 3 ROWS
        PARTITION BY Trades HASH(Sym), BY Names HASH(Sym) PARTITIONS PARTS
        AS SELECT t.Sym, count(*) N FROM Trades t INNER JOIN Names n ON t.Sym = n.Sym
        GROUP BY t.Sym;""", r"its KEEP is counted per instance"),
    "key_without_hash": ("""CREATE OUTPUT WINDOW W PRIMARY KEY (TradeId)
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS AS SELECT * FROM Trades;""",
                         r"PRIMARY KEY does not include the hash column Sym"),
    "source_keep": ("""CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
        AS SELECT t.Sym, max(t.Qty) M FROM Trades t KEEP 5 ROWS GROUP BY t.Sym;""",
                    r"KEEP on its source t"),
}


def _plans(tmp_path, body: str) -> tuple[Plan, Plan]:
    path = tmp_path / "p.ccl"
    path.write_text(HEAD + body)
    return _plan(str(path), 2), _plan(str(path), 3)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_rescale_that_could_change_results_is_refused_naming_the_element_and_reason(
        tmp_path, case):
    body, reason = REFUSED[case]
    old, new = _plans(tmp_path, body)
    moves, refused = rescale_moves(old, new)
    assert len(refused) == 1, refused
    name = "Seen" if case.startswith("flex") else "W"  # (a Flex's element is its output)
    assert refused[0].startswith(f"element '{name}': ")
    assert re.search(reason, refused[0]), refused[0]
    assert name not in moves


def test_hash_on_the_state_key_is_allowed_and_unchanged_counts_need_nothing(tmp_path):
    body = """CREATE OUTPUT WINDOW W PRIMARY KEY (Sym, TradeId) KEEP 2 ROWS PER (Sym)
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS AS SELECT * FROM Trades;
    CREATE OUTPUT WINDOW T PRIMARY KEY (TradeId, Sym) KEEP 1 MINUTE
        PARTITION BY Trades HASH(Sym) PARTITIONS PARTS AS SELECT * FROM Trades;
    CREATE OUTPUT STREAM S PARTITION BY Trades ROUNDROBIN PARTITIONS 2
        AS SELECT * FROM Trades WHERE Trades.Qty > 1;"""
    old, new = _plans(tmp_path, body)
    moves, refused = rescale_moves(old, new)
    assert refused == []
    assert set(moves) == {"W", "T"}  # S keeps its count
    assert _json(moves)["W"]["hash"] == [["Sym", "Sym", "string"]]
    assert moves["W"].store == "engine"
    # a stateless ROUNDROBIN filter holds nothing per instance: its count may change
    assert not new.element("S").stateful and why_not_rescaled(new.element("S"), new) is None


def test_ccl_rescale_refuses_without_touching_the_checkpoint(tmp_path):
    """The refusal is printed per element and the checkpoint's plan stays as it was."""
    old, _ = _plans(tmp_path, REFUSED["keep_rows"][0])
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "plan.json").write_text(json.dumps(plan_to_json(old), indent=1, sort_keys=True))
    before = (checkpoint / "plan.json").read_text()
    code, out, err = ccl("rescale", str(checkpoint), "--param", "PARTS=3")
    assert code == 1
    assert "element 'W': KEEP 3 ROWS is counted per instance" in err
    assert "nothing was moved" in err
    assert (checkpoint / "plan.json").read_text() == before
    code, _, err = ccl("rescale", str(tmp_path / "nowhere"), "--param", "PARTS=3")
    assert code == 2 and "plan.json" in err and "Traceback" not in err


def test_ccl_run_rescale_refuses_before_spark_starts(tmp_path):
    """`ccl run --rescale` asks the same rule first: a refusal ends the run before Spark starts;
    without a checkpoint there is nothing to rescale."""
    old, _ = _plans(tmp_path, REFUSED["roundrobin"][0])
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "plan.json").write_text(json.dumps(plan_to_json(old), indent=1, sort_keys=True))
    project = str(tmp_path / "p.ccl")
    code, _, err = ccl("run", project, "--checkpoint", str(checkpoint), "--param", "PARTS=3",
                       "--rescale", "--until-idle", "--output-dir", str(tmp_path / "out"))
    assert code == 1
    assert "element 'W': it is partitioned ROUNDROBIN" in err
    code, _, err = ccl("run", project, "--rescale", "--until-idle",
                       "--output-dir", str(tmp_path / "out"))
    assert code == 2 and "--checkpoint" in err


# --- joins ----------------------------------------------------------------------------------------

JOIN_PROJECT = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT WINDOW Quotes SCHEMA (Sym string, Venue string, Bid float) PRIMARY KEY (Sym, Venue);
CREATE INPUT WINDOW Limits SCHEMA (Sym string, MaxBid float) PRIMARY KEY (Sym);
CREATE INPUT WINDOW Venues SCHEMA (Venue string, Name string) PRIMARY KEY (Venue);
CREATE OUTPUT WINDOW Checked PRIMARY KEY (Sym, Venue)
    PARTITION BY Quotes HASH(Sym), BY Limits HASH(Sym) PARTITIONS PARTS
AS SELECT q.Sym Sym, q.Venue Venue, q.Bid Bid, l.MaxBid MaxBid, v.Name Name
   FROM Quotes q INNER JOIN Limits l ON q.Sym = l.Sym LEFT JOIN Venues v ON q.Venue = v.Venue;
"""


def _join_files(directory: str, batches: int) -> None:
    """``batches`` files per input (one a batch): quotes of 11 symbols at 4 venues, their limits,
    the venues' names (a broadcast input), with updates and deletes in later files."""
    for b in range(batches):
        quotes = [("i" if b == 0 else "p", f"S{k}", f"V{(k + i) % 4}", k + i + b / 10)
                  for k in range(11) for i in range(2 + b % 2)]
        if b == 2:
            quotes += [("d", f"S{k}", f"V{k % 4}", 0) for k in range(0, 11, 3)]
        write_rows(os.path.join(directory, "quotes", f"q{b}.csv"),
                   ["ESP_OPS", "Sym", "Venue", "Bid"], quotes)
        limits = [("p", f"S{k}", 10 * k + b) for k in range(b, 11, 2)]
        if b == 2:
            limits += [("d", "S4", 0), ("d", "S7", 0)]
        write_rows(os.path.join(directory, "limits", f"l{b}.csv"),
                   ["ESP_OPS", "Sym", "MaxBid"], limits)
        venues = {0: [("i", "V0", "Xetra"), ("i", "V1", "LSE")],
                  1: [("i", "V2", "Euronext"), ("u", "V0", "Xetra EU")],
                  2: [("d", "V1", ""), ("i", "V3", "SIX")]}[b % 3]
        write_rows(os.path.join(directory, "venues", f"v{b}.csv"),
                   ["ESP_OPS", "Venue", "Name"], venues)


def _join_inputs(directory) -> dict:
    return {name: str(directory / "in" / name.lower())
            for name in ("Quotes", "Limits", "Venues")}


@pytest.mark.parametrize("first,then", [(4, 7), (7, 2)])
def test_a_join_resumed_after_a_rescale_gives_the_outputs_of_the_new_count(
        spark, tmp_path, first, then):
    """Each hashed port's rows go to the instance their hash chooses, the broadcast port's rows
    to every instance, and the broadcast rows' match counts are counted again (the LEFT JOIN's
    unmatched rows come and go with the venues' deletes after the move)."""
    def outputs(out) -> list:
        return sorted((r["Sym"], r["Venue"], r["Bid"], r["MaxBid"], r["Name"])
                      for r in out.rows("Checked"))
    whole = tmp_path / "whole"
    _join_files(str(whole / "in"), 3)
    expected = outputs(run_project(spark, whole, JOIN_PROJECT, _join_inputs(whole),
                                   params={"PARTS": str(then)}))
    assert any(not r[4] for r in expected) and any(r[4] for r in expected)  # (unmatched: null)
    split = tmp_path / "split"
    _join_files(str(split / "in"), 2)
    run_project(spark, split, JOIN_PROJECT, _join_inputs(split), params={"PARTS": str(first)})
    run = str(split / "run")
    code, out, err = ccl("rescale", run, "--param", f"PARTS={then}")
    assert code == 0, err
    assert f"Checked: {first} -> {then} instances" in out
    # the broadcast venues are in every new instance
    assert _instances(run, "Checked") == set(range(then))
    _join_files(str(split / "in"), 3)
    got = run_project(spark, split, JOIN_PROJECT, _join_inputs(split),
                      params={"PARTS": str(then)})
    assert outputs(got) == expected
    assert got.bad_records() == []


def test_a_join_on_its_hash_columns_with_a_broadcast_input_is_allowed(tmp_path):
    """A stream joined with a broadcast window (the stream's rows kept nowhere, the window's
    copied to every instance) and a join of two hashed inputs on their hash columns move."""
    body = """CREATE OUTPUT STREAM S PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
        AS SELECT t.TradeId TradeId, n.Name Name FROM Trades t INNER JOIN Names n
        ON t.Sym = n.Sym;
    CREATE INPUT WINDOW Pos SCHEMA (Sym string, Qty integer) PRIMARY KEY (Sym);
    CREATE OUTPUT WINDOW W PRIMARY KEY (Sym)
        PARTITION BY Pos HASH(Sym), BY Names HASH(Sym) PARTITIONS PARTS
        AS SELECT n.Sym Sym, n.Name Name, p.Qty Qty FROM Pos p RIGHT JOIN Names n
        ON p.Sym = n.Sym;"""
    old, new = _plans(tmp_path, body)
    moves, refused = rescale_moves(old, new)
    assert refused == []
    as_json = _json(moves)
    assert as_json["S"]["join"]["ports"][1] is None  # Names: broadcast
    assert as_json["S"]["hash"] == []  # a stream keeps no output rows
    assert [p["alias"] for p in as_json["W"]["join"]["ports"]] == ["p", "n"]
    assert as_json["W"]["hash"] == [["Sym", "Sym", "string"]]


JOIN_GROUP_PROJECT = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT WINDOW Quotes SCHEMA (Sym string, Venue string, Bid float) PRIMARY KEY (Sym, Venue);
CREATE INPUT WINDOW Limits SCHEMA (Sym string, MaxBid float) PRIMARY KEY (Sym);
CREATE INPUT WINDOW Venues SCHEMA (Venue string, Name string) PRIMARY KEY (Venue);
CREATE OUTPUT WINDOW Best PRIMARY KEY DEDUCED
    PARTITION BY Quotes HASH(Sym), BY Limits HASH(Sym) PARTITIONS PARTS
AS SELECT q.Sym Sym, max(q.Bid) Top, count(*) N, sum(l.MaxBid) Limit, count(v.Name) Named
   FROM Quotes q INNER JOIN Limits l ON q.Sym = l.Sym LEFT JOIN Venues v ON q.Venue = v.Venue
   GROUP BY q.Sym;
CREATE OUTPUT WINDOW PerVenue PRIMARY KEY DEDUCED
    PARTITION BY Quotes HASH(Sym) PARTITIONS PARTS
AS SELECT q.Venue Venue, q.Sym Sym, max(q.Bid) Top, count(*) N, max(v.Name) Name
   FROM Quotes q LEFT JOIN Venues v ON q.Venue = v.Venue
   GROUP BY q.Venue, q.Sym HAVING count(*) > 0;
"""


def test_joins_that_aggregate_by_their_hash_columns_are_allowed(tmp_path):
    """A join that aggregates moves as a join (its ports) and as an aggregation (its groups):
    the move says where the hash column sits in the group key."""
    path = tmp_path / "p.ccl"
    path.write_text(JOIN_GROUP_PROJECT)
    moves, refused = rescale_moves(_plan(str(path), 4), _plan(str(path), 7))
    assert refused == []
    assert {n: (m["store"], m["groups"], m["hash"]) for n, m in _json(moves).items()} == {
        "Best": ("engine", [0], [["Sym", "Sym", "string"]]),
        "PerVenue": ("engine", [1], [["Sym", "Sym", "string"]])}
    assert moves["PerVenue"].join is not None
    assert moves["PerVenue"].join.ports[1] is None  # Venues: broadcast


@pytest.mark.parametrize("first,then", [(4, 7), (7, 2)])
def test_a_join_that_aggregates_resumed_after_a_rescale_gives_the_outputs_of_the_new_count(
        spark, tmp_path, first, then):
    """Each hashed port's rows, each group (with its rows, input and output keys) and each output
    row go to the instance their hash chooses, the broadcast venues to every instance; updates
    and deletes after the move retract from the moved groups."""
    def outputs(out) -> dict:
        return {"Best": sorted((r["Sym"], r["Top"], r["N"], r["Limit"], r["Named"])
                               for r in out.rows("Best")),
                "PerVenue": sorted((r["Venue"], r["Sym"], r["Top"], r["N"], r["Name"])
                                   for r in out.rows("PerVenue"))}
    whole = tmp_path / "whole"
    _join_files(str(whole / "in"), 3)
    expected = outputs(run_project(spark, whole, JOIN_GROUP_PROJECT, _join_inputs(whole),
                                   params={"PARTS": str(then)}))
    assert expected["Best"] and expected["PerVenue"]
    split = tmp_path / "split"
    _join_files(str(split / "in"), 2)
    run_project(spark, split, JOIN_GROUP_PROJECT, _join_inputs(split),
                params={"PARTS": str(first)})
    run = str(split / "run")
    code, out, err = ccl("rescale", run, "--param", f"PARTS={then}")
    assert code == 0, err
    assert f"Best: {first} -> {then} instances" in out
    assert f"PerVenue: {first} -> {then} instances" in out
    groups = _group_instances(run, "Best")
    assert len(groups) == 11
    for key, held in groups.items():  # (one bucket per instance: the runs have 2 buckets)
        inst = spark_pmod_hash([key[0]], ["string"], then)
        assert held == {(inst, inst % 2)}
    _join_files(str(split / "in"), 3)
    got = run_project(spark, split, JOIN_GROUP_PROJECT, _join_inputs(split),
                      params={"PARTS": str(then)})
    assert outputs(got) == expected
    assert got.bad_records() == []


# --- Flex -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("first,then", [(4, 7), (7, 2)])
def test_a_flex_resumed_after_a_rescale_gives_the_outputs_of_the_new_count(
        spark, tmp_path, first, then):
    """A Flex whose dictionaries are read and written by the row's hash column and whose event
    cache is keyed by it: each entry and bucket goes to the instance its key's hash chooses."""
    def outputs(out) -> list:
        return sorted((r["Sym"], r["N"], r["Total"], r["Last3"]) for r in out.rows("Seen"))
    whole = tmp_path / "whole"
    _files(str(whole / "in"), 3)
    expected = outputs(run_project(spark, whole, FLEX_PROJECT, {"Trades": str(whole / "in")},
                                   params={"PARTS": str(then)}))
    split = tmp_path / "split"
    _files(str(split / "in"), 2)
    run_project(spark, split, FLEX_PROJECT, {"Trades": str(split / "in")},
                params={"PARTS": str(first)})
    run = str(split / "run")
    code, out, err = ccl("rescale", run, "--param", f"PARTS={then}")
    assert code == 0, err
    assert f"Seen: {first} -> {then} instances" in out
    assert _instances(run, "Seen") == {spark_pmod_hash([f"S{k}"], ["string"], then)
                                       for k in range(11)}
    _files(str(split / "in"), 3)
    got = run_project(spark, split, FLEX_PROJECT, {"Trades": str(split / "in")},
                      params={"PARTS": str(then)})
    assert outputs(got) == expected
    assert got.bad_records() == []


def test_flex_keyed_by_its_hash_column_is_allowed_and_example2_is_refused(tmp_path):
    """The dictionaries and cache of FLEX_PROJECT are keyed by Trades.Sym; ESP's Example 2 moves
    its cache to the bucket of Symbol2 (keyCache), which is refused; a window whose outputs do
    not pass the hash column through is too."""
    path = tmp_path / "f.ccl"
    path.write_text(FLEX_PROJECT)
    moves, refused = rescale_moves(_plan(str(path), 2), _plan(str(path), 3))
    assert refused == []
    assert _json(moves)["Seen"]["hash"] == [["Sym", "Sym", "string"]]
    assert _json(moves)["Seen"]["flex"]["vars"] == {
        "seen": {"kind": "dictionary", "type": "string"},
        "total": {"kind": "dictionary", "type": "string"},
        "recent": {"kind": "cache", "positions": [0], "types": ["string"]}}
    seed = os.path.join(os.path.dirname(__file__), "projects", "seeds", "flex_keycache_example2.ccl")
    text = open(seed).read().replace("PARTITIONS 3", "PARTITIONS PARTS")
    path.write_text("DECLARE PARAMETER integer PARTS := 3; END;\n" + text)
    moves, refused = rescale_moves(_plan(str(path), 3), _plan(str(path), 5))
    assert refused == ["element 'Top3Trades': its event cache tradesCache is moved to another "
                       "bucket (keyCache), which may live in another instance"]
    path.write_text(FLEX_PROJECT.replace("PRIMARY KEY (Sym)", "PRIMARY KEY (N)")
                    .replace("Sym = Trades.Sym;", "Sym = upper(Trades.Sym);"))
    _, refused = rescale_moves(_plan(str(path), 2), _plan(str(path), 3))
    assert len(refused) == 1 and "does not pass the hash column" not in refused[0]
    assert "not every output of its window passes the hash column Sym through" in refused[0]


FLEX_WINDOW_PROJECT = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE INPUT WINDOW Limits SCHEMA (Sym string, MaxQty integer) PRIMARY KEY (Sym);
CREATE FLEX F IN Trades, Limits
    OUT OUTPUT WINDOW Counts SCHEMA (Sym string, Kind string, V integer) PRIMARY KEY (Sym, Kind)
    PARTITION BY Trades HASH(Sym), BY Limits HASH(Sym) PARTITIONS PARTS
BEGIN
    DECLARE dictionary(string, integer) changes; dictionary(string, integer) qty; END;
    ON Limits {
        if (isnull(changes[Limits.Sym])) { changes[Limits.Sym] := 0; }
        changes[Limits.Sym] := changes[Limits.Sym] + 1;
        output setOpcode([Sym = Limits.Sym; Kind = 'limit';
                          V = changes[Limits.Sym] * 100 + Limits.MaxQty;], upsert);
    };
    ON Trades {
        if (isnull(qty[Trades.Sym])) { qty[Trades.Sym] := 0; }
        qty[Trades.Sym] := qty[Trades.Sym] + Trades.Qty;
        output setOpcode([Sym = Trades.Sym; Kind = 'trade'; V = qty[Trades.Sym];], upsert);
    };
END;
"""


def test_a_flex_over_a_window_input_resumed_after_a_rescale(spark, tmp_path):
    """Two hashed inputs, one a window (its rows mirrored per instance: they move with their
    hash too), 7 -> 3 instances. (Each handler's outputs depend on its own input alone: the order
    of the two inputs' rows differs between runs split into other batches.)"""
    def inputs(directory) -> dict:
        return {"Trades": str(directory / "in"), "Limits": str(directory / "limits")}

    def limits(directory, batches: int) -> None:
        for b in range(batches):
            rows = [("p", f"S{k}", 5 + (k + b) % 7) for k in range(b, 11, 2)]
            if b == 2:  # deletes of rows the moved mirrors hold (else: bad records)
                rows += [("d", "S0", 0), ("d", "S1", 0)]
            write_rows(os.path.join(str(directory / "limits"), f"l{b}.csv"),
                       ["ESP_OPS", "Sym", "MaxQty"], rows)

    def outputs(out) -> list:
        return sorted((r["Sym"], r["Kind"], r["V"]) for r in out.rows("Counts"))
    whole = tmp_path / "whole"
    _files(str(whole / "in"), 3)
    limits(whole, 3)
    expected = outputs(run_project(spark, whole, FLEX_WINDOW_PROJECT, inputs(whole),
                                   params={"PARTS": "3"}))
    assert expected
    split = tmp_path / "split"
    _files(str(split / "in"), 2)
    limits(split, 2)
    run_project(spark, split, FLEX_WINDOW_PROJECT, inputs(split), params={"PARTS": "7"})
    code, out, err = ccl("rescale", str(split / "run"), "--param", "PARTS=3")
    assert code == 0, err
    _files(str(split / "in"), 3)
    limits(split, 3)
    got = run_project(spark, split, FLEX_WINDOW_PROJECT, inputs(split), params={"PARTS": "3"})
    assert outputs(got) == expected
    assert got.bad_records() == []


# --- aggregations run by the per-instance engine --------------------------------------------------

GROUP_PROJECT = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT STREAM S SCHEMA (k string, j long, v integer);
CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED PARTITION BY S HASH(k) PARTITIONS PARTS
    AS SELECT s.k, s.j, sum(s.v) v, count(*) n FROM S s WHERE s.v >= 0 GROUP BY s.k, s.j;
CREATE INPUT WINDOW U SCHEMA (k string, j long, v integer) PRIMARY KEY (k, j);
CREATE OUTPUT WINDOW X PRIMARY KEY DEDUCED PARTITION BY U HASH(k) PARTITIONS PARTS
    AS SELECT u.k, max(u.v) top, sum(u.v) v, count(*) n FROM U u GROUP BY u.k;
CREATE OUTPUT WINDOW Y PRIMARY KEY DEDUCED PARTITION BY U HASH(k) PARTITIONS PARTS
    AS SELECT u.v, u.k, count(*) n FROM U u GROUP BY u.v, u.k;
"""


def _group_files(directory: str, batches: int) -> None:
    """``batches`` files of the stream S and of the window U, one a batch: U's later files
    update and delete rows of the earlier ones (their groups' retractions need the moved
    state), and move rows between the groups of Y."""
    for b in range(batches):
        write_rows(os.path.join(directory, "s", f"s{b}.csv"), ["k", "j", "v"],
                   [(f"k{(b + i) % 11}", i % 3, i + 10 * b) for i in range(30)])
        rows = [("i" if b == 0 else "p", f"k{i % 9}", i % 4, (i * (b + 1)) % 7)
                for i in range(24)]
        if b == 2:
            rows += [("d", f"k{i}", i % 4, 0) for i in range(0, 9, 2)]
        write_rows(os.path.join(directory, "u", f"u{b}.csv"), ["ESP_OPS", "k", "j", "v"], rows)


def _group_outputs(out) -> dict:
    return {"W": sorted((r["k"], r["j"], r["v"], r["n"]) for r in out.rows("W")),
            "X": sorted((r["k"], r["top"], r["v"], r["n"]) for r in out.rows("X")),
            "Y": sorted((r["k"], r["v"], r["n"]) for r in out.rows("Y"))}


def _group_instances(run: str, element: str) -> dict[tuple, set[tuple[int, int]]]:
    """Group key -> the (instance, bucket) pairs whose stored aggregate state holds it."""
    from runtime.arrow_state import load_states, newest_batches, rows_root
    from runtime.state.store import BucketStore
    state_dir = os.path.join(run, "state", element)
    held: dict[tuple, set[int]] = {}
    for bucket, _ in newest_batches(state_dir, 10 ** 6).items():
        states = load_states(state_dir, bucket, 10 ** 6)
        with BucketStore.open(rows_root(state_dir), bucket) as store:
            for inst in states:
                for key, _ in store.scan("a.selects.0.agg.g", (inst,)):
                    held.setdefault(tuple(key[1:]), set()).add((inst, bucket))
    return held


@pytest.mark.parametrize("first,then", [(4, 7), (7, 2)])
def test_an_engine_aggregation_resumed_after_a_rescale_gives_the_outputs_of_the_new_count(
        spark, tmp_path, first, then):
    """Aggregations the per-instance engine runs, over a stream and over a window (updates and
    deletes after the move retract from moved groups), two of them with each instance's groups
    spread over the buckets (``by_group``): each group goes to the instance its hash now chooses
    and, within it, to the bucket the runtime sends its rows to."""
    from ccl.plan.codec import plan_from_json
    from runtime.run_dir import by_group

    def inputs(root) -> dict:
        return {"S": str(root / "in" / "s"), "U": str(root / "in" / "u")}
    whole = tmp_path / "whole"
    _group_files(str(whole / "in"), 3)
    want = run_project(spark, whole, GROUP_PROJECT, inputs(whole), params={"PARTS": str(then)})
    assert set(by_group(plan_from_json(want.plan))) == {"W", "X"}
    expected = _group_outputs(want)
    split = tmp_path / "split"
    _group_files(str(split / "in"), 2)
    run_project(spark, split, GROUP_PROJECT, inputs(split), params={"PARTS": str(first)})
    run = str(split / "run")
    code, out, err = ccl("rescale", run, "--param", f"PARTS={then}")
    assert code == 0, err
    for name in ("W", "X", "Y"):
        assert f"{name}: {first} -> {then} instances" in out
    for name, types, count in (("W", ["string", "long"], 33), ("X", ["string"], 9)):
        groups = _group_instances(run, name)
        assert len(groups) == count
        for key, held in groups.items():  # (the runs have 2 buckets)
            inst = spark_pmod_hash([key[0]], ["string"], then)
            assert held == {(inst, spark_pmod_hash([inst, *key], ["integer", *types], 2))}
    _group_files(str(split / "in"), 3)
    got = run_project(spark, split, GROUP_PROJECT, inputs(split), params={"PARTS": str(then)})
    assert _group_outputs(got) == expected
    assert got.bad_records() == []


def test_engine_aggregations_grouped_by_the_hash_columns_are_allowed(tmp_path):
    """Each move of an aggregation the per-instance engine runs says where the hash columns sit
    in its group key (over a stream and over a window, the hash column first or not)."""
    path = tmp_path / "p.ccl"
    path.write_text(GROUP_PROJECT)
    old, new = _plan(str(path), 4), _plan(str(path), 7)
    assert {e.name: e.physical.path for e in new.elements if e.physical is not None
            and e.name in ("W", "X", "Y")} == dict.fromkeys("WXY", "per-instance")
    moves, refused = rescale_moves(old, new)
    assert refused == []
    assert {n: (m["store"], m["groups"], m["hash"]) for n, m in _json(moves).items()} == {
        "W": ("engine", [0], [["k", "k", "string"]]),
        "X": ("engine", [0], [["k", "k", "string"]]),
        "Y": ("engine", [1], [["k", "k", "string"]])}


# The moves of GROUP_PROJECT from 3 to 5 instances in the journal (RUN/rescale.json) as the code
# before the typed moves (main at c76e8b0) wrote them: a journal a crash left behind is finished by
# the next run, which may be of this ccl.
GROUP_MOVES_3_TO_5 = {
    "W": {"from": 3, "to": 5, "store": "engine", "hash": [["k", "k", "string"]], "groups": [0],
          "spread": {"columns": ["k", "j"], "types": ["string", "long"], "items": ["k", "j"]}},
    "X": {"from": 3, "to": 5, "store": "engine", "hash": [["k", "k", "string"]], "groups": [0],
          "spread": {"columns": ["k"], "types": ["string"], "items": ["k"]}},
    "Y": {"from": 3, "to": 5, "store": "engine", "hash": [["k", "k", "string"]], "groups": [1]}}


@pytest.mark.parametrize("written_by", ["this ccl", "the ccl before typed moves"])
def test_an_engine_aggregation_rescale_cut_short_is_finished_by_the_next_run(
        spark, tmp_path, monkeypatch, written_by):
    """A crash when the built directories are to be swapped in (or, for a journal of the ccl
    before the moves were typed, before they were built): the journal (with how a ``by_group``
    aggregation's groups find their buckets) makes the next run finish the move. This ccl writes
    the journal the earlier one wrote."""
    import runtime.rescale as rs
    from runtime.rebucket import last_commit
    from runtime.run_dir import RunDirs
    from runtime.run_setup import layout_of

    def inputs(root) -> dict:
        return {"S": str(root / "in" / "s"), "U": str(root / "in" / "u")}
    whole = tmp_path / "whole"
    _group_files(str(whole / "in"), 2)
    expected = _group_outputs(run_project(spark, whole, GROUP_PROJECT, inputs(whole),
                                          params={"PARTS": "5"}))
    split = tmp_path / "split"
    _group_files(str(split / "in"), 1)
    run_project(spark, split, GROUP_PROJECT, inputs(split), params={"PARTS": "3"})
    run = str(split / "run")
    old, new = _plan(str(split / "p.ccl"), 3), _plan(str(split / "p.ccl"), 5)
    moves, refused = rescale_moves(old, new)
    assert refused == [] and set(moves) == {"W", "X", "Y"}
    journal = os.path.join(run, "rescale.json")
    if written_by == "this ccl":
        def killed(path: str) -> None:
            raise KeyboardInterrupt("killed")
        monkeypatch.setattr(rs, "swap_dir", killed)
        with pytest.raises(KeyboardInterrupt):
            rs.rescale_run(run, old, new, moves)
        job = json.loads(open(journal).read())
        assert job["moves"] == GROUP_MOVES_3_TO_5 and job["swapping"] is True
        monkeypatch.undo()
    else:
        with open(journal, "w", encoding="utf-8") as f:
            json.dump({"batch": last_commit(RunDirs(run)), "buckets": layout_of(run).buckets,
                       "moves": GROUP_MOVES_3_TO_5, "plan": plan_to_json(new),
                       "swapping": False}, f)
    _group_files(str(split / "in"), 2)
    got = run_project(spark, split, GROUP_PROJECT, inputs(split), params={"PARTS": "5"})
    assert _group_outputs(got) == expected
    assert not os.path.exists(journal)
    assert json.loads(open(os.path.join(run, "plan.json")).read()) == plan_to_json(new)


def test_moves_come_back_equal_from_their_journal_form(tmp_path):
    """Every move of the projects above (joins, Flex, aggregations, nothing kept) comes back
    from its JSON form equal, and the journal the ccl before typed moves wrote decodes to the
    moves this ccl makes."""
    from runtime.rebucket import group_spec
    from tests.rescale_projects import PROJECT as PLAIN
    path = tmp_path / "p.ccl"
    stateless = HEAD + """CREATE OUTPUT STREAM S PARTITION BY Trades ROUNDROBIN PARTITIONS PARTS
        AS SELECT * FROM Trades WHERE Trades.Qty > 1;"""
    stores = []
    for text in (PLAIN, FLEX_PROJECT, FLEX_WINDOW_PROJECT, JOIN_PROJECT, JOIN_GROUP_PROJECT,
                 GROUP_PROJECT, stateless):
        path.write_text(text)
        moves, refused = rescale_moves(_plan(str(path), 4), _plan(str(path), 7))
        assert refused == [] and moves
        for move in moves.values():
            assert move_from_json(json.loads(json.dumps(move_to_json(move)))) == move
            stores.append((move.store, move.join is not None, move.flex is not None))
    assert {("none", False, False), ("native", False, False), ("engine", False, False),
            ("engine", True, False), ("engine", False, True)} <= set(stores)
    path.write_text(GROUP_PROJECT)
    new = _plan(str(path), 5)
    moves, _ = rescale_moves(_plan(str(path), 3), new)
    spread = {name: dataclasses.replace(moves[name], spread=group_spec(new, name))
              for name in ("W", "X")}
    assert {name: move_from_json(m) for name, m in GROUP_MOVES_3_TO_5.items()} == {**moves,
                                                                                  **spread}


@pytest.mark.parametrize("bad,why", [
    ([], "an object is expected, not list"),
    ({"from": 2, "to": 3, "store": "disk", "hash": []}, "a store 'disk' is not known"),
    ({"from": 2, "store": "none", "hash": []}, "missing 'to'"),
    ({"from": 2, "to": 3, "store": "engine", "hash": [["k", "k"]]}, "not enough values"),
    ({"from": 2, "to": 3, "store": "engine", "hash": [], "flex": {"ports": {}, "outputs": [],
      "vars": {"v": {"kind": "counter"}}}}, "a Flex variable kept as 'counter' is not known"),
])
def test_a_malformed_move_is_a_format_error_of_one_line(bad, why):
    with pytest.raises(PlanFormatError, match=f"^not a valid move: .*{re.escape(why)}") as info:
        move_from_json(bad)
    assert "\n" not in str(info.value)


def test_a_journal_or_checkpoint_plan_this_ccl_cannot_read_is_refused_saying_so(tmp_path):
    """A rescale journal whose moves or plan do not decode stops the run with a RunError naming
    the journal, which stays in place; ``ccl rescale`` of a checkpoint whose plan.json does not
    decode says so, without a traceback, and moves nothing."""
    from runtime.rescale import finish_rescale
    from runtime.run_setup import RunError
    path = tmp_path / "p.ccl"
    path.write_text(GROUP_PROJECT)
    new = plan_to_json(_plan(str(path), 5))
    run = tmp_path / "run"
    run.mkdir()
    journal = run / "rescale.json"
    for job, why in (
            ({"batch": 0, "buckets": 2, "moves": {"W": {"from": 3, "store": "engine"}},
              "plan": new, "swapping": False}, "not a valid move: missing 'to'"),
            ({"batch": 0, "buckets": 2, "moves": GROUP_MOVES_3_TO_5,
              "plan": {**new, "version": 2}, "swapping": False},
             "plan version 2 is not supported"),
            ({"batch": 0, "buckets": 2, "moves": {"Nowhere": GROUP_MOVES_3_TO_5["Y"]},
              "plan": new, "swapping": True}, "missing 'Nowhere'"),
            ({"batch": 0, "moves": {}, "plan": new, "swapping": True}, "missing 'buckets'"),
            ([], "list indices must be integers")):
        journal.write_text(json.dumps(job))
        with pytest.raises(RunError, match="holds a move to other instance counts that this ccl "
                                           "cannot read") as info:
            finish_rescale(str(run))
        assert why in str(info.value) and journal.exists()
    journal.write_text("{")
    with pytest.raises(RunError, match="rescale.json: not JSON"):
        finish_rescale(str(run))
    journal.unlink()
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    broken = {**new, "elements": [{"name": "W"}]}
    (checkpoint / "plan.json").write_text(json.dumps(broken))
    code, out, err = ccl("rescale", str(checkpoint), "--file", str(path), "--param", "PARTS=3")
    assert code == 1 and "Traceback" not in err, err
    assert "plan.json is not a plan this ccl reads (not a valid plan: missing 'kind')" in err
    assert json.loads((checkpoint / "plan.json").read_text()) == broken
