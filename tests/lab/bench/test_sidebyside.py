"""The side-by-side runner's pure parts: the arguments it passes on and one table of both
fabrics' figures."""

from __future__ import annotations

from pathlib import Path

from mininet_scenarios.bench.sidebyside import Figures, combine, pattern_figures, split_out


def test_out_and_plain_are_taken_out_of_the_arguments() -> None:
    rest, out = split_out(["--seeds", "1", "--out", "x/y", "--plain", "--rate=4"], Path("d"))
    assert rest == ["--seeds", "1", "--rate=4"] and out == Path("x/y")
    assert split_out(["--out=z"], Path("d")) == ([], Path("z"))


def test_both_fabrics_in_one_table() -> None:
    doc = {"summary": {"stride4": {"nonblocking": {"median": 1.0}, "loom": {"median": 0.97}}}}
    both: dict[str, Figures] = {
        "equipped": pattern_figures(doc),
        "plain": {"stride4": {"loom": 0.91}},
    }
    table, text = combine(both)
    assert table == {"stride4": {"loom": {"equipped": 0.97, "plain": 0.91}}}
    header, row = text.splitlines()
    assert header.split() == ["loom", "equipped", "loom", "plain"]
    assert row.split() == ["stride4", "0.97", "0.91"]
