"""A report's Markdown rendered as HTML for the site: tables as tables, plots as images.

Python-Markdown renders it (a well-kept library: CommonMark-close tables and code spans that a
hand-written renderer would get wrong at the edges). A report in the results root may have been
edited by anyone with write access to it, so the page is built safe whatever it holds: raw HTML in
it is shown as text, never run, and a link or image whose address is not a relative path or
http(s) (``javascript:``, ``data:``, ``file:``) loses that address.
"""

from __future__ import annotations

import xml.etree.ElementTree as etree
from urllib.parse import urlsplit

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

SAFE_SCHEMES = ("", "http", "https")  # "": a relative path (the report's plots, copied beside it)


class _DropUnsafeAddresses(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        for element in root.iter():
            for attribute in ("href", "src"):
                address = element.get(attribute)
                if address is not None and not _safe(address):
                    del element.attrib[attribute]


class _SafeReports(Extension):
    """No raw HTML (its block and inline readers removed: it stays text), no unsafe addresses."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        md.treeprocessors.register(_DropUnsafeAddresses(md), "drop_unsafe_addresses", 0)


def _safe(address: str) -> bool:
    try:
        scheme = urlsplit(address.strip()).scheme.lower()
    except ValueError:
        return False
    return scheme in SAFE_SCHEMES and not address.strip().startswith("//")


def render(text: str) -> str:
    """``text`` (a report's Markdown) as an HTML fragment."""
    return markdown.markdown(text, extensions=["tables", _SafeReports()], output_format="html")
