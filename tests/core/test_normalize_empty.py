"""``normalize("")``: the empty relative reference is its own canonical form, not an error.

RFC 3987 section 2.2 (``IRI-reference = IRI / irelative-ref``) and RFC 3986 section
4.4 (same-document reference): ``""`` is a reference like ``"#"`` and ``"?"``, which
normalize to themselves.  The callers that need a URL (the CLI's dedupe, the plugin's
link paths) check for a scheme before they normalize; this pins both halves.
"""

from __future__ import annotations

import pytest

from iri_scrapy import IRIError, normalize
from iri_scrapy.store.dedupe import Deduper, Outcome


@pytest.mark.parametrize("ref", ["", "#", "?", "a/b"])
@pytest.mark.parametrize("level", ["simple", "syntax", "scheme"])
def test_relative_references_normalize_to_themselves(ref: str, level: str) -> None:
    assert normalize(ref, level) == ref
    assert normalize(ref, level, form="iri") == ref


def test_empty_is_no_url_for_the_callers_that_need_one() -> None:
    d = Deduper()
    assert d.process("")[0] is Outcome.BLANK
    assert d.process("a/b") == (Outcome.REJECT, "no scheme: not an absolute URL")
    with pytest.raises(IRIError, match="port"):
        normalize("http://a:x/")
