"""Every behaviour id the code, tests and documents cite ("compatibility C2") is defined in
docs/compatibility.md, and no reference points outside the repository any more (the old
"SPEC C2" form named a file that is not in it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPATIBILITY = ROOT / "docs" / "compatibility.md"
SEARCHED = ["src", "tests", "bench", "docs", "examples"]

ID = r"[A-Z]\d+"
# "compatibility C2", "compatibility C2, C8", "compatibility M1-M4", "compatibility C7/K2";
# a reference may wrap onto the next comment line.
CITATION = re.compile(rf"\bcompatibility\s+((?:{ID})(?:\s*(?:,|/|-|and)\s*(?:#\s*)?{ID}\b)*)")
OLD_FORM = re.compile(r"\bSPEC\s+(?:#\s*)?" + ID + r"\b")


def documents() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SEARCHED:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".md", ".java"}]
    this = Path(__file__).resolve()  # its examples are not citations
    return [p for p in files if "__pycache__" not in p.parts and p.is_file() and p != this]


def expand(cited: str) -> set[str]:
    """'M1-M4' means M1, M2, M3, M4; lists and slashes name each id."""
    ids: set[str] = set()
    for part in re.split(r"\s*(?:,|/|and)\s*", cited.replace("#", " ")):
        ends = [e.strip() for e in part.split("-")]
        if len(ends) == 2 and ends[0][0] == ends[1][0]:
            ids |= {f"{ends[0][0]}{n}" for n in range(int(ends[0][1:]), int(ends[1][1:]) + 1)}
        else:
            ids |= {e for e in ends if e}
    return ids


def defined_ids() -> set[str]:
    return set(re.findall(rf"^### ({ID})\b", COMPATIBILITY.read_text(), flags=re.MULTILINE))


def test_expand_reads_lists_and_ranges() -> None:
    assert expand("C2, C8") == {"C2", "C8"}
    assert expand("M1-M4") == {"M1", "M2", "M3", "M4"}
    assert expand("C7/K2") == {"C7", "K2"}


def test_every_cited_id_is_defined_in_docs_compatibility() -> None:
    defined = defined_ids()
    assert len(defined) >= 40
    cited: dict[str, set[str]] = {}
    for path in documents():
        if path == COMPATIBILITY:
            continue
        for match in CITATION.finditer(path.read_text(errors="replace")):
            for one in expand(match[1]):
                cited.setdefault(one, set()).add(str(path.relative_to(ROOT)))
    assert cited, "no citation found: has the form changed?"
    missing = {one: sorted(where) for one, where in cited.items() if one not in defined}
    assert not missing, f"cited but not in docs/compatibility.md: {missing}"


def test_no_reference_to_a_document_outside_the_repository() -> None:
    left = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
        for path in documents()
        for text in [path.read_text(errors="replace")]
        for m in OLD_FORM.finditer(text)
    ]
    assert not left, f"'SPEC <id>' references left (use 'compatibility <id>'): {left}"
