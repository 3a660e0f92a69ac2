"""pdf-attach: embed files in a PDF.

Usage: python3 -I pdf-attach.py INPUT.pdf ATTACH.json OUTPUT.pdf

ATTACH.json is data the host wrote: {"files": [{"path", "name"}],
"relationship": one of Source, Data, Alternative, Supplement,
Unspecified, "description"}. Each file is embedded under its name with
its MIME type (by its extension; application/octet-stream when it has
none known), its size, the relationship (/AFRelationship) and, as PDF/A-3
wants, listed in the document's /AF. Runs inside the sandbox: INPUT.pdf
and the files are untrusted; the files are only read and copied.
"""

import json
import mimetypes
import sys

import pikepdf

# What the extension does not say on every system.
TYPES = {".xml": "text/xml", ".json": "application/json", ".csv": "text/csv", ".txt": "text/plain"}


def main():
    src, data, out = sys.argv[1:4]
    with open(data, encoding="utf-8") as f:
        o = json.load(f)
    with pikepdf.open(src) as pdf:
        af = pdf.Root.get("/AF")
        if not isinstance(af, pikepdf.Array):
            af = pikepdf.Array()
        for f in o["files"]:
            name = f["name"]
            ext = ("." + name.rsplit(".", 1)[1].lower()) if "." in name else ""
            mime = TYPES.get(ext) or mimetypes.guess_type(name)[0] or "application/octet-stream"
            with open(f["path"], "rb") as fh:
                content = fh.read()
            spec = pikepdf.AttachedFileSpec(pdf, content, description=o.get("description", ""), filename=name, mime_type=mime)
            # The file specification is an indirect object: the name
            # tree and /AF refer to the same one.
            spec.obj.AFRelationship = pikepdf.Name("/" + o["relationship"])
            pdf.attachments[name] = spec
            af.append(spec.obj)
        pdf.Root.AF = af
        pdf.save(out)


if __name__ == "__main__":
    main()
