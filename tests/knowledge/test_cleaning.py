"""HTML becomes text through Beautiful Soup, with headings and lists kept as Markdown
lines; HTML with scripts is refused, whatever the format says."""

from __future__ import annotations

import pytest

from knowledge.cleaning import UnsafeHtml, body_to_text, html_to_text


def test_html_keeps_headings_paragraphs_and_list_items_and_drops_styles_and_forms():
    html = """<html><head><title>T</title><style>p{color:red}</style></head><body>
      <h1>Returns</h1><p>You can return <b>most</b> items.</p>
      <h2>Conditions</h2><ul><li>Unused</li><li>Original packaging</li></ul>
      <form><input value="x"></form><!-- a comment --><p>Line one<br>line two</p></body></html>"""
    assert html_to_text(html) == (
        "# Returns\n\nYou can return most items.\n\n## Conditions\n\n- Unused\n\n- Original packaging\n\n"
        "Line one\nline two"
    )


@pytest.mark.parametrize("html", [
    "<p>Hi</p><script>alert(1)</script>",
    "<p onclick=\"steal()\">Hi</p>",
    "<a href=\" javascript:alert(1)\">x</a>",
    "<img src=x onerror=alert(1)>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
])
def test_html_with_scripts_is_refused(html):
    with pytest.raises(UnsafeHtml):
        html_to_text(html)


def test_markdown_with_an_embedded_script_is_refused_too():
    with pytest.raises(UnsafeHtml):
        body_to_text("# Title\n\n<script>alert(1)</script>", "markdown")


def test_markdown_and_text_keep_their_lines_with_tidy_blank_lines():
    assert body_to_text("# A\r\n\r\n\r\n\r\nb  c\x07\n", "markdown") == "# A\n\nb  c"
    assert body_to_text("one   two\n\n\n\nthree", "text") == "one two\n\nthree"
    assert body_to_text("x < y and y > z", "markdown") == "x < y and y > z"
