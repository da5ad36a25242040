"""A segment's score and review flag written into an XLIFF file, in each version's terms.

- 1.2: an `<alt-trans origin="stapel" match-quality="83.0">` right after the target,
  holding a copy of the translation (with `mid` for a `<mrk mtype="seg">` segment); the
  target's `state` is `needs-review-translation` for a segment to review and
  `translated` for one over the job's `min_score`.
- 2.x: an `<mtc:match ref="#id" type="mt" origin="stapel" matchQuality="83.0">` in the
  unit's `<mtc:matches>` (modules come first in a unit); `subState="stapel:needs-review"`
  on a segment to review.

A segment to review gets no candidate: its target is empty or its source, not the
translation the score is for. A rerun replaces the candidates Stapel wrote before.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from lxml import etree

from stapel.formats.base import Mark

NS_MTC = "urn:oasis:names:tc:xliff:matches:2.0"
ORIGIN = "stapel"
"""The `origin` of the candidates Stapel writes (and replaces on a rerun)."""
REVIEWED1 = {True: "needs-review-translation", False: "translated"}
"""XLIFF 1.2 target state by review flag: a segment over the job's min_score is translated."""
SUBSTATE2 = "stapel:needs-review"

Qualify = Callable[[str], str]


def mark1(
    unit: etree._Element,
    target: etree._Element,
    written: etree._Element | None,
    mid: str | None,
    found: Mark,
    q: Qualify,
) -> None:
    """Mark a 1.2 segment: `written` is its translation (the target, or its `mid` mrk)."""
    if found.review is not None:
        target.set("state", REVIEWED1[found.review])
    for old in list(unit.iterchildren(q("alt-trans"))):
        if old.get("origin") == ORIGIN and old.get("mid") == mid:
            unit.remove(old)
    if written is None or not offers(found, written):
        return
    alt = etree.Element(q("alt-trans"), {"origin": ORIGIN, "match-quality": found.percent})
    if mid is not None:
        alt.set("mid", mid)
    copied = copy.deepcopy(written)
    copied.tag, copied.tail = q("target"), None
    copied.attrib.clear()
    alt.append(copied)
    alt.tail = target.tail  # indented as the target is
    target.addnext(alt)


def mark2(unit: etree._Element, segment: etree._Element, found: Mark, q: Qualify) -> None:
    """Mark a 2.x segment: its review subState, and its score as a candidate of the unit."""
    if found.review:
        segment.set("subState", SUBSTATE2)
    elif found.review is False and segment.get("subState") == SUBSTATE2:
        del segment.attrib["subState"]
    matches = _drop_own(unit, segment)
    target = segment.find(q("target"))
    if target is None or not offers(found, target):
        return
    if matches is None:
        matches = etree.Element(f"{{{NS_MTC}}}matches", nsmap={"mtc": NS_MTC})
        matches.tail = unit.text  # first in the unit, indented as its first child is
        unit.insert(0, matches)
    match = etree.SubElement(
        matches,
        f"{{{NS_MTC}}}match",
        {
            "ref": "#" + _segment_id(unit, segment, q),
            "type": "mt",
            "origin": ORIGIN,
            "matchQuality": found.percent,
        },
    )
    original = unit.find(q("originalData"))  # the codes' data, which a match keeps its own
    for part in (original, segment.find(q("source")), target):
        if part is not None:
            copied = copy.deepcopy(part)
            copied.tail = None
            match.append(copied)


def offers(found: Mark, target: etree._Element) -> bool:
    """Whether the target is the scored translation, worth offering as a candidate."""
    return (
        found.score is not None
        and not found.review
        and bool("".join(target.itertext()).strip())  # an empty one offers nothing
    )


def _drop_own(unit: etree._Element, segment: etree._Element) -> etree._Element | None:
    """Remove the segment's earlier candidate; return the unit's matches, if any are left."""
    matches = unit.find(f"{{{NS_MTC}}}matches")
    if matches is None or not segment.get("id"):
        return matches
    for old in list(matches.iterchildren(f"{{{NS_MTC}}}match")):
        if old.get("origin") == ORIGIN and old.get("ref") == "#" + segment.get("id"):
            matches.remove(old)
    if len(matches) == 0:  # the module requires at least one match
        unit.remove(matches)
        return None
    return matches


def _segment_id(unit: etree._Element, segment: etree._Element, q: Qualify) -> str:
    """The segment's id, given one unique in its unit where it has none (a match needs it)."""
    if segment.get("id"):
        return segment.get("id", "")
    taken = {e.get("id") for e in unit.iter() if e.get("id")}
    made = f"s{1 + sum(1 for _ in segment.itersiblings(q('segment'), preceding=True))}"
    while made in taken:
        made = f"{ORIGIN}-{made}"
    segment.set("id", made)
    return made
