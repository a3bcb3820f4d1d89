"""ELAN annotation document (EAF 3.0): one alignable tier per tier, times in integer milliseconds.

Empty gap intervals are not written (ELAN has no need of them); a point is a 1 ms annotation. The header's
properties name the run (``kame-run``, ``kame-title``) and what produced it (``kame-provenance``). When the export has
a WAV (``--audio``) the header links it: ``MEDIA_URL`` its absolute file URL, ``RELATIVE_MEDIA_URL`` ``./name.wav``
(ELAN finds the file beside the document when the folder moves). A portable document (the app's download, unzipped
on another machine) names no folder of the machine that wrote it: ``MEDIA_URL`` is ``file:///name.wav``, and ELAN
finds the WAV beside it by its relative URL. Written with :mod:`xml.etree.ElementTree`, so every label is escaped as
XML needs.
"""
from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath

from ..files import write_bytes_atomic
from .tiers import Annotations, IntervalTier, PointTier

SCHEMA = "http://www.mpi.nl/tools/elan/EAFv3.0.xsd"
LINGUISTIC_TYPE = "default-lt"
#: ELAN's four standard constraints, as ELAN writes them into every new document
CONSTRAINTS = (
    ("Time_Subdivision", "Time subdivision of parent annotation's time interval, no time gaps allowed within "
                         "this interval"),
    ("Symbolic_Subdivision", "Symbolic subdivision of a parent annotation. Annotations refering to the same "
                             "parent are ordered"),
    ("Symbolic_Association", "1-1 association with a parent annotation"),
    ("Included_In", "Time alignable annotations within the parent annotation's time interval, gaps are allowed"),
)


def _ms(t: float) -> int:
    return int(round(float(t) * 1000))


def eaf_element(doc: Annotations, *, media: Path | None = None, author: str = "KAME studio",
                date: dt.datetime | None = None, portable: bool = False) -> ET.Element:
    """The EAF document of ``doc``, its root element (``media``: the WAV beside it, if any; ``portable``: linked
    by its name only, see the module docstring)."""
    when = (date or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="seconds")
    root = ET.Element("ANNOTATION_DOCUMENT", {
        "AUTHOR": author, "DATE": when, "FORMAT": "3.0", "VERSION": "3.0",
        "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance", "xsi:noNamespaceSchemaLocation": SCHEMA})
    header = ET.SubElement(root, "HEADER", {"MEDIA_FILE": "", "TIME_UNITS": "milliseconds"})
    if media is not None:
        url = PurePosixPath("/", media.name).as_uri() if portable else media.resolve().as_uri()
        ET.SubElement(header, "MEDIA_DESCRIPTOR", {"MEDIA_URL": url, "MIME_TYPE": "audio/x-wav",
                                                   "RELATIVE_MEDIA_URL": f"./{media.name}"})
    spans: list[tuple[str, list[tuple[int, int, str]]]] = []
    for tier in doc.tiers:
        if isinstance(tier, IntervalTier):
            spans.append((tier.name, [(_ms(i.start), _ms(i.end), i.text) for i in tier.labelled]))
        elif isinstance(tier, PointTier):
            spans.append((tier.name, [(_ms(p.t), _ms(p.t) + 1, p.text) for p in tier.points]))
    slots = sorted((t, k, side) for k, (_, items) in enumerate(spans) for j, item in enumerate(items)
                   for side, t in ((2 * j, item[0]), (2 * j + 1, item[1])))
    slot_id = {(k, side): f"ts{n}" for n, (_, k, side) in enumerate(slots, 1)}
    order = ET.SubElement(root, "TIME_ORDER")
    for n, (t, _, _) in enumerate(slots, 1):
        ET.SubElement(order, "TIME_SLOT", {"TIME_SLOT_ID": f"ts{n}", "TIME_VALUE": str(t)})
    count = 0
    for k, (name, items) in enumerate(spans):
        tier_el = ET.SubElement(root, "TIER", {"LINGUISTIC_TYPE_REF": LINGUISTIC_TYPE, "TIER_ID": name})
        for j, (_, _, text) in enumerate(items):
            count += 1
            annotation = ET.SubElement(ET.SubElement(tier_el, "ANNOTATION"), "ALIGNABLE_ANNOTATION", {
                "ANNOTATION_ID": f"a{count}", "TIME_SLOT_REF1": slot_id[k, 2 * j],
                "TIME_SLOT_REF2": slot_id[k, 2 * j + 1]})
            ET.SubElement(annotation, "ANNOTATION_VALUE").text = text
    for name, value in (("lastUsedAnnotationId", str(count)), ("kame-run", doc.run), ("kame-title", doc.title),
                        ("kame-provenance", doc.provenance)):
        if value:
            ET.SubElement(header, "PROPERTY", {"NAME": name}).text = value
    ET.SubElement(root, "LINGUISTIC_TYPE", {"GRAPHIC_REFERENCES": "false", "LINGUISTIC_TYPE_ID": LINGUISTIC_TYPE,
                                            "TIME_ALIGNABLE": "true"})
    for stereotype, description in CONSTRAINTS:
        ET.SubElement(root, "CONSTRAINT", {"DESCRIPTION": description, "STEREOTYPE": stereotype})
    ET.indent(root, space="    ")
    return root


def write_eaf(doc: Annotations, path: str | Path, *, media: Path | None = None,
              date: dt.datetime | None = None, portable: bool = False) -> Path:
    """Write ``doc`` as an EAF document (UTF-8) at ``path``; ``media``: the WAV to link (``portable``: by its name
    only)."""
    path = Path(path)
    data = ET.tostring(eaf_element(doc, media=media, date=date, portable=portable), encoding="UTF-8",
                       xml_declaration=True)
    write_bytes_atomic(path, data)
    return path
