"""pdf-metadata: read a PDF's document information from qpdf's JSON, or
turn values to write into an update qpdf applies.

Usage: python3 -I pdf-metadata.py read QPDF.json OUT.json
       python3 -I pdf-metadata.py update QPDF.json UPDATE.json VALUES

QPDF.json is `qpdf --json=2 --json-key=qpdf --json-key=pages
--json-key=encrypt` of the document. VALUES is a JSON object of document
information keys (Title, Author, Subject, Keywords, CreationDate,
ModDate) and their new text (dates already as PDF dates, D:…).

qpdf 11 has no option that sets the information dictionary; its JSON
update (--update-from-json) replaces the objects it names. The update
names the information dictionary's object with its entries merged, or,
when the document has none (or a direct one), a new object past
maxobjectid and the trailer pointing at it. Runs inside the sandbox: the
JSON describes an untrusted document.
"""

import json
import re
import sys

# qpdf JSON v2 writes a text string as "u:<text>" and any other as
# "b:<hex>"; an indirect reference as "N G R".
REF = re.compile(r"^[1-9][0-9]{0,9} [0-9]{1,5} R$")
READ = [
    ("title", "/Title"), ("author", "/Author"), ("subject", "/Subject"),
    ("keywords", "/Keywords"), ("creator", "/Creator"), ("producer", "/Producer"),
    ("creation_date", "/CreationDate"), ("mod_date", "/ModDate"),
]
WRITABLE = {"Title", "Author", "Subject", "Keywords", "CreationDate", "ModDate"}


def text(v):
    if not isinstance(v, str):
        return None
    if v.startswith("u:"):
        return v[2:]
    if v.startswith("b:"):
        try:
            raw = bytes.fromhex(v[2:])
        except ValueError:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("latin-1")
    return None


def info(objects):
    """The trailer, the information dictionary and its reference (or None)."""
    trailer = objects.get("trailer", {}).get("value", {})
    if not isinstance(trailer, dict):
        trailer = {}
    ref = trailer.get("/Info")
    if isinstance(ref, str) and REF.match(ref):
        d = objects.get("obj:" + ref, {}).get("value")
        return trailer, (d if isinstance(d, dict) else {}), ref
    return trailer, (ref if isinstance(ref, dict) else {}), None


def read(q, out):
    _, d, _ = info(q["qpdf"][1])
    meta = {name: text(d.get(key)) for name, key in READ}
    meta["pages"] = len(q.get("pages", []))
    meta["encrypted"] = bool(q.get("encrypt", {}).get("encrypted", False))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=2)
        f.write("\n")


def update(q, out, values):
    header, objects = q["qpdf"][0], q["qpdf"][1]
    trailer, d, ref = info(objects)
    d = dict(d)
    for k, v in values.items():
        if k not in WRITABLE or not isinstance(v, str):
            sys.exit("pdf-metadata: cannot set %r" % k)
        d["/" + k] = "u:" + v
    if ref is not None:
        changes = {"obj:" + ref: {"value": d}}
    else:
        ref = "%d 0 R" % (int(header["maxobjectid"]) + 1)
        t = dict(trailer)
        t["/Info"] = ref
        changes = {"obj:" + ref: {"value": d}, "trailer": {"value": t}}
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"qpdf": [header, changes]}, f)


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("read", "update"):
        sys.exit(__doc__)
    with open(sys.argv[2], encoding="utf-8") as f:
        q = json.load(f)
    if sys.argv[1] == "read":
        read(q, sys.argv[3])
    else:
        update(q, sys.argv[3], json.loads(sys.argv[4]))


if __name__ == "__main__":
    main()
