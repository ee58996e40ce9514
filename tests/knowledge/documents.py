"""Documents made by the tests: a PDF of text pages (written by hand, the smallest valid
PDF with Helvetica text) and a DOCX (python-docx) with heading styles, a list and a table."""

from __future__ import annotations

import io


def pdf(pages: list[str]) -> bytes:
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    for text in pages:
        content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        page_no = len(objects) + 1
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {page_no + 1} 0 R "
                       f"/Resources << /Font << /F1 {{font}} 0 R >> >> >>")
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content.decode()}\nendstream")
        kids.append(f"{page_no} 0 R")
    font = len(objects) + 1
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>"
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n{body.replace('{font}', str(font))}\nendobj\n".encode())
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def docx(sections: list[tuple[str, str]], *, title: str = "", bullets: tuple[str, ...] = (),
         table: list[list[str]] | None = None) -> bytes:
    """Sections under Heading 1 styles; then a bulleted list and a table, when given."""
    import docx as python_docx

    document = python_docx.Document()
    if title:
        document.add_heading(title, level=0)
    for heading, text in sections:
        document.add_heading(heading, level=1)
        document.add_paragraph(text)
    for item in bullets:
        document.add_paragraph(item, style="List Bullet")
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, text in enumerate(row):
                grid.cell(r, c).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
