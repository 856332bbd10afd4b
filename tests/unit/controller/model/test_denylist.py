"""The fabric-wide denylist as data: the merge of the hosts' reports (who saw each link, since when) and its
record document, round trip and refusals."""

from __future__ import annotations

import json

import pytest

from controller.model.denylist import Denylist, DenylistError, from_text, to_text

UP, DOWN = ("p0-t0-0", "p0-t1-1"), ("p0-t1-1", "p0-t0-0")


def test_a_link_keeps_its_since_while_a_host_reports_it_and_goes_when_none_does():
    first = Denylist.from_reports({"h0": [UP, DOWN], "h2": []}, now=100.0)
    assert first.seen_by == {UP: {"h0"}, DOWN: {"h0"}} and first.since == {UP: 100.0, DOWN: 100.0}
    second = Denylist.from_reports({"h0": [DOWN], "h2": [DOWN, ("h3", "p0-t0-1")]}, now=105.5, before=first)
    assert second.seen_by == {DOWN: {"h0", "h2"}, ("h3", "p0-t0-1"): {"h2"}}
    assert second.since == {DOWN: 100.0, ("h3", "p0-t0-1"): 105.5}
    assert not second.same_as(first)
    assert Denylist.from_reports({"h0": [], "h2": []}, now=110.0, before=second).links == frozenset()


def test_the_record_document_round_trips_byte_for_byte():
    dl = Denylist.from_reports({"h0": [UP, DOWN], "h2": [DOWN]}, now=1795689000.25)
    text = to_text(dl)
    assert json.loads(text) == {"format": "srv6-fabric-denylist/1", "links": [
        {"from": "p0-t0-0", "to": "p0-t1-1", "seen_by": ["h0"], "since": 1795689000.25},
        {"from": "p0-t1-1", "to": "p0-t0-0", "seen_by": ["h0", "h2"], "since": 1795689000.25}]}
    back = from_text(text)
    assert back == dl and to_text(back) == text
    assert from_text(to_text(Denylist())) == Denylist()


@pytest.mark.parametrize("doc, why", [
    ("[", "not valid JSON"),
    ('{"failures": []}', "not a denylist document"),
    ('{"format": "srv6-fabric-denylist/1", "links": [], "x": 1}', "not a denylist document"),
    ('{"format": "srv6-fabric-denylist/1", "links": [{"from": "a", "to": "b"}]}', "links[0] is not"),
    ('{"format": "srv6-fabric-denylist/1", "links": [{"from": "a b", "to": "b", "seen_by": ["h0"]}]}',
     "links[0].from: name 'a b' may hold only"),
    ('{"format": "srv6-fabric-denylist/1", "links": [{"from": "a", "to": "b", "seen_by": []}]}',
     "links[0].seen_by: not a non-empty list of hosts"),
    ('{"format": "srv6-fabric-denylist/1", "links": [{"from": "a", "to": "b", "seen_by": ["h0"], "since": NaN}]}',
     "links[0].since: nan is not a time"),
])
def test_a_document_that_is_not_a_denylist_is_one_line(doc, why):
    with pytest.raises(DenylistError) as e:
        from_text(doc)
    assert why in str(e.value) and "\n" not in str(e.value)
