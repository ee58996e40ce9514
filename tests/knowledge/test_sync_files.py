"""A files source: a PDF and a DOCX made by the test are parsed on the sync (the CPU
tier), indexed, and their passages name the page or the section; a replaced file is
re-indexed, a removed one's article goes, an unchanged one costs nothing; a file of
the wrong type, too large or a zip bomb is refused with a message that says so."""

from __future__ import annotations

import io
import zipfile

import pytest

from knowledge import extraction, selectors, sources
from knowledge.models import Article
from knowledge.services import KnowledgeInputError
from tests.factories import make_tenant

from .conftest import run_sync
from .documents import docx, pdf

pytestmark = pytest.mark.django_db


def files_source(tenant):
    return sources.source_create(tenant=tenant, kind="files", name="Manuals")


def test_a_pdf_and_a_docx_are_indexed_and_their_citations_name_the_page_or_section():
    tenant = make_tenant().tenant
    source = files_source(tenant)
    sources.source_file_add(source=source, name="Warranty.pdf", data=pdf([
        "Every frame carries a lifetime warranty for the first owner.",
        "Wheels and hubs are covered for two years from the date of purchase.",
        "Claims need the original receipt and the frame number."]))
    sources.source_file_add(source=source, name="Care guide.docx", data=docx(
        [("Cleaning", "Rinse the drivetrain with warm soapy water after muddy rides."),
         ("Lubrication", "Oil the chain every two hundred kilometres with a drip lubricant.")]))
    source = run_sync(source)

    assert source.status == "synced", source.error
    assert {a.title: a.status for a in Article.objects.filter(origin=source)} == {
        "Warranty.pdf": "indexed", "Care guide.docx": "indexed"}
    hits = selectors.retrieve(tenant_id=tenant.pk, message="are hubs covered", k=1)
    assert selectors.sources_of(hits)[0]["title"] == "Warranty.pdf"
    assert selectors.sources_of(hits)[0]["section"] == "Page 2"
    hits = selectors.retrieve(tenant_id=tenant.pk, message="how often should I oil the chain", k=1)
    assert (hits[0].title, hits[0].heading) == ("Care guide.docx", "Lubrication")


def test_a_docx_keeps_its_title_headings_lists_and_tables_as_markdown():
    page = extraction.file_page("Sizing.docx", docx(
        [("Frame sizes", "Pick the frame by your height.")], title="Sizing guide",
        bullets=("Measure without shoes", "Round up between two sizes"),
        table=[["Frame", "Rider height"], ["54 cm", "170-178 cm"], ["56 cm", "178-185 cm"]]))
    lines = page.text.splitlines()
    assert lines[0] == "# Sizing guide" and "# Frame sizes" in lines
    assert "- Measure without shoes" in lines and "- Round up between two sizes" in lines
    # A table row is one line: a chunk (and a prompt) reads a size with its height.
    assert "Frame | Rider height" in lines and "54 cm | 170-178 cm" in lines


def test_a_replaced_file_is_reindexed_a_removed_one_goes_and_an_unchanged_one_costs_nothing():
    tenant = make_tenant().tenant
    source = files_source(tenant)
    sources.source_file_add(source=source, name="a.md", data=b"# Bells\n\nEvery bike ships with a bell.")
    sources.source_file_add(source=source, name="b.txt", data=b"Lights are sold separately.")
    source = run_sync(source)
    before = {a.title: a for a in Article.objects.filter(origin=source)}

    sources.source_file_add(source=source, name="b.txt", data=b"Lights are included with every e-bike.")
    source = run_sync(source)
    after = {a.title: a for a in Article.objects.filter(origin=source)}
    assert after["a.md"].indexed_at == before["a.md"].indexed_at
    assert "included" in after["b.txt"].text and source.changed == 1

    sources.source_file_remove(source=source, file_id=source.files.get(name="a.md").pk)
    source = run_sync(source)
    assert [a.title for a in Article.objects.filter(origin=source)] == ["b.txt"]


@pytest.mark.parametrize("name,data,message", [
    ("virus.exe", b"MZ", "upload a PDF, DOCX"),
    ("big.txt", b"x" * (extraction.MAX_FILE_BYTES + 1), "over 10 MiB"),
    ("empty.md", b"", "is empty"),
])
def test_a_file_of_the_wrong_type_too_large_or_empty_is_refused_on_upload(name, data, message):
    source = files_source(make_tenant().tenant)
    with pytest.raises(KnowledgeInputError, match=message):
        sources.source_file_add(source=source, name=name, data=data)


def test_a_docx_that_is_a_zip_bomb_is_refused_unread():
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"\0" * (60 * 1024 * 1024))
    source = files_source(make_tenant().tenant)
    sources.source_file_add(source=source, name="bomb.docx", data=raw.getvalue())
    source = run_sync(source)
    assert source.failed == 1 and "unpacks to" in source.state["errors"][0]["error"]
    assert not Article.objects.filter(origin=source).exists()


def test_a_pdf_over_the_page_limit_is_refused_with_the_limit(monkeypatch):
    monkeypatch.setattr(extraction, "MAX_PDF_PAGES", 2)
    with pytest.raises(extraction.ExtractionError, match="has 3 pages; the limit is 2"):
        extraction.file_page("long.pdf", pdf(["one", "two", "three"]))
