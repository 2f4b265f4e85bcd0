"""``kmirror verify``'s report and exit rules (no Spark needed): what fails a mirror in each
delivery mode and for each owner of the destination topic, and the tables an operator reads."""

from __future__ import annotations

from mirror.verify.report import Finding, PairReport, failures, report_text


DUPLICATED = PairReport("t", "t", 10, 11, (Finding("duplicated", "t", 0, 1, 4),), destination_total=11)
GONE = PairReport("u", "m.u", 8, 10, (Finding("gone", "m.u", 1, 2, 0),), destination_total=10)
FOREIGN = (Finding("foreign", "w", 1, 1, 17), Finding("foreign-duplicate", "w", 0, 1, 12))


def _foreign(created: bool) -> PairReport:
    """1,200 records compared, two foreign, 30 more read at the destination (not covered)."""
    return PairReport("w", "w", 1200, 1200, FOREIGN, destination_total=1232, created=created)


def test_duplicates_fail_exactly_once_only_and_gone_records_never_fail():
    assert failures([DUPLICATED, GONE], at_least_once=False) == [DUPLICATED.findings[0]]
    assert failures([DUPLICATED, GONE], at_least_once=True) == []


def test_foreign_records_fail_in_a_topic_kmirror_created_or_under_strict_only():
    assert failures([_foreign(created=True)], at_least_once=False) == list(FOREIGN)
    # At-least-once, a foreign duplicate may be a dead copier's (see failures()): only the other fails.
    assert failures([_foreign(created=True)], at_least_once=True) == [FOREIGN[0]]
    assert failures([_foreign(created=False)], at_least_once=False) == []
    assert failures([_foreign(created=False)], at_least_once=False, strict=True) == list(FOREIGN)
    assert (_foreign(True).foreign, _foreign(True).not_covered) == (2, 30)


def test_the_report_says_each_pair_s_verdict_and_each_finding_s_first_offset():
    clean = PairReport("v", "v", 5, 5, (), destination_total=5)
    text = report_text([clean, DUPLICATED, GONE]).splitlines()
    assert text[0].split() == ["PAIR", "SOURCE-RECORDS", "DESTINATION-RECORDS", "VERDICT"]
    assert text[1].split() == ["v", "->", "v", "5", "5", "exact;", "compared", "5", "of", "5"]
    assert text[2].split() == ["t", "->", "t", "10", "11", "FAILED:", "duplicated", "1;", "compared", "11", "of", "11"]
    assert text[3].split() == ["u", "->", "m.u", "8", "10", "exact", "(gone", "2);", "compared", "10", "of", "10"]
    assert text[5].split()[:4] == ["KIND", "PARTITION", "RECORDS", "FIRST-OFFSET"]
    assert text[6].split()[:4] == ["duplicated", "t-0", "1", "4"]
    assert text[7].split()[:4] == ["gone", "m.u-1", "2", "0"] and "no longer at the source" in text[7]


def test_foreign_records_and_what_was_not_covered_are_said_in_the_verdict():
    made, found = report_text([_foreign(created=True)]), report_text([_foreign(created=False)])
    assert "FAILED: foreign 1, foreign-duplicate 1; compared 1,200 of 1,232" in made
    assert ("foreign 1, foreign-duplicate 1; foreign records reported, not failed: kmirror found w there, and other "
            "producers may be expected to write it (--strict fails them); compared 1,200 of 1,232") in found
    assert "FAILED: foreign 1, foreign-duplicate 1" in report_text([_foreign(created=False)], strict=True)
    for text in (made, found):
        assert "w: 30 records not covered" in text
        rows = [line.split()[:4] for line in text.splitlines() if line.startswith("foreign")]
        assert rows == [["foreign", "w-1", "1", "17"], ["foreign-duplicate", "w-0", "1", "12"]]
        assert "consumers read that record twice" in text


def test_a_source_topic_made_again_is_compared_by_its_id_and_its_earlier_copies_are_named():
    report = PairReport("orders", "orders", 9, 9, (), destination_total=15, topic_id="new-id", earlier_ids=("old-id",))
    text = report_text([report])
    assert ("orders: compared the topic of id new-id, the one the source has now; the copies of old-id (deleted at "
            "the source, and made again) have no source to compare with, and are among the records not covered") in text
    assert "orders: 6 records not covered" in text and failures([report], at_least_once=False) == []


def test_the_copies_into_a_lost_destination_topic_are_named_as_gone():
    text = report_text([PairReport("orders", "orders", 9, 9, (), destination_total=9, lost_ids=("lost-id",))])
    assert ("orders: the copies into lost-id (a destination topic of the name, deleted since) are gone with it, and "
            "were not compared") in text
