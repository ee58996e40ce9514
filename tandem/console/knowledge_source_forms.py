"""The console's forms for knowledge sources (Tenant → Knowledge → Sources). Types and
ranges are checked here for the browser's sake; `knowledge.sources` checks them again
and its `KnowledgeInputError` is shown beside the field it names."""

from __future__ import annotations

from django import forms

from knowledge.sources import LIMITS

from .forms import Form


def _int(label: str, name: str, help_text: str) -> forms.IntegerField:
    low, high = LIMITS[name]
    return forms.IntegerField(label=label, min_value=low, max_value=high, help_text=f"{help_text} ({low} to {high}).")


class SourceSettingsForm(Form):
    name = forms.CharField(label="Name", max_length=200)
    url = forms.URLField(label="Start page, sitemap or llms.txt", max_length=1000, assume_scheme="https",
                         widget=forms.TextInput(attrs={"inputmode": "url"}),  # styled as the other fields
                         help_text="A page to crawl from, or a sitemap (.xml) or llms.txt listing the pages.")
    any_host = forms.BooleanField(label="Follow links to other hosts", required=False,
                                  help_text="Off: only pages on the start page's host.")
    max_pages = _int("Page limit", "max_pages", "Pages fetched per sync at most")
    max_depth = _int("Link depth", "max_depth", "Links followed away from the start page")
    delay_ms = _int("Delay between requests (ms)", "delay_ms", "Politeness towards the site")
    sync_every_hours = _int("Sync every (hours)", "sync_every_hours", "0: only with Sync now")

    @classmethod
    def initial_for(cls, source) -> dict:
        return {name: getattr(source, name) for name in cls.base_fields}


class FilesSourceForm(Form):
    name = forms.CharField(label="Name", max_length=200, help_text="E.g. Manuals, Policies.")

    def __init__(self, *args, **kwargs):
        # Beside the website form on one page: ids of its own, so each label names its field.
        kwargs.setdefault("auto_id", "files_%s")
        super().__init__(*args, **kwargs)


class SourceFileForm(Form):
    file = forms.FileField(label="File", help_text="PDF, DOCX, HTML, Markdown or text, at most 10 MiB; a file "
                                                   "of the same name is replaced.")
