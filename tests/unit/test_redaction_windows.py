"""Redaction's sliding window at its edges (``judges.backends.media.scrub``, issue 23 item 2 and issue 29 item 4):
an 8-character piece of the key at the very start or end of the text, the key's own first and last pieces, two
pieces that touch or overlap, and a 7-character piece (kept). Exact outputs, written by hand: a window that stops
one character short, or one gram short of the key's end, leaves a character of the key behind."""

import pytest

KEY = "sk-live-Q7w9ZpL2xR4mN8vB6tY1"  # 28 characters; no mask characters, so only the window applies


@pytest.mark.parametrize(
    "text,expected",
    [
        ("sk-live-Q7w9ZpL2xR4mN8vB6tY1", "***"),  # the whole text
        ("key=sk-live-Q7w9ZpL2xR4mN8vB6tY1", "key=***"),  # ends the text
        ("sk-live-Q7w9ZpL2xR4mN8vB6tY1 was sent", "*** was sent"),  # starts it
        ("tail mN8vB6tY1", "tail ***"),  # the key's last 9 characters, at the end
        ("tail N8vB6tY1", "tail ***"),  # its last 8 exactly (the last window of the key)
        ("sk-live- head", "*** head"),  # its first 8 exactly, at the start
        ("x ZpL2xR4m y", "x *** y"),  # 8 from the middle
        ("x ZpL2xR4 y", "x ZpL2xR4 y"),  # 7: kept (ordinary words would match)
        ("x sk-live-N8vB6tY1 y", "x *** y"),  # two pieces that touch: one redaction
        ("x sk-live-Q7w9Q7w9ZpL2 y", "x *** y"),  # two overlapping windows of one piece, repeated
        ("a 7w9ZpL2x b 7w9ZpL2x", "a *** b ***"),  # the same piece twice, the second at the end
    ],
)
def test_window_edges(text, expected):
    from vbench_ray.judges.backends.media import scrub

    assert scrub(text, [KEY]) == expected
    assert scrub(text.upper(), [KEY]) == expected.upper()
