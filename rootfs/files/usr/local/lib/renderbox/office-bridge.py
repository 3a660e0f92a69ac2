"""office-bridge: the renderbox agent's link to a LibreOffice booted ahead of
the job, inside the same sandbox.

Usage: python3 -I office-bridge.py PIPE-NAME WORKDIR [--no-warm-up]

It connects over UNO to the soffice the agent started with
--accept=pipe,name=PIPE-NAME;urp (retrying while it boots), converts a small
built-in document once (in WORKDIR; not with --no-warm-up, when the agent
boots LibreOffice for the job at hand) so Writer, the DOCX import and the
PDF export are loaded, and writes {"ready": true, ...} as one line on
stdout. Then it reads one request per line on stdin, {"input": PATH,
"output": PATH, "format": "pdf", "options": {...}} (wire.OfficeOptions),
and answers each with one line, {"ok": true} or {"error": TEXT}.

Documents are loaded hidden, read-only, with macros never executed and no
links updated; paths outside /tmp are refused. The sandbox is the boundary:
nothing here is trusted to contain a hostile document, it only must not
widen what soffice --convert-to would do.

A request may carry the document's password. It is used to load the
document and never written anywhere: no error text quotes the request.
Without it (or with a wrong one) LibreOffice fails the load at once; it
asks no question, as it has no interaction handler to ask through.
"""

import io
import json
import os
import re
import sys
import time
import zipfile

# The protocol owns the real stdout; anything else that writes to fd 1
# (pyuno, a library) goes to stderr instead, where the agent keeps a tail.
_proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr

import uno  # noqa: E402  (after the fd shuffle on purpose)
from com.sun.star.beans import PropertyValue  # noqa: E402
from com.sun.star.connection import NoConnectException  # noqa: E402

# How long soffice may take to open its pipe. Booting takes ~2.5 s under
# gVisor; a loaded host can take much longer. The agent also stops waiting
# as soon as soffice exits.
CONNECT_DEADLINE_S = 300

# Export filter by document kind, most specific first (an Impress document
# is also a drawing document).
EXPORTS = [
    ("com.sun.star.presentation.PresentationDocument", "impress_pdf_Export"),
    ("com.sun.star.drawing.DrawingDocument", "draw_pdf_Export"),
    ("com.sun.star.sheet.SpreadsheetDocument", "calc_pdf_Export"),
    ("com.sun.star.text.WebDocument", "writer_web_pdf_Export"),
    ("com.sun.star.text.GenericTextDocument", "writer_pdf_Export"),
]


def prop(name, value):
    p = PropertyValue()
    p.Name, p.Value = name, value
    return p


def connect(pipe):
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext(
        "com.sun.star.bridge.UnoUrlResolver", local)
    url = "uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe
    deadline = time.monotonic() + CONNECT_DEADLINE_S
    while True:
        try:
            ctx = resolver.resolve(url)
            break
        except NoConnectException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    return ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)


def under_tmp(path):
    """A clean absolute path below /tmp whose directory holds no symlink."""
    if not path.startswith("/tmp/") or os.path.normpath(path) != path:
        return False
    d = os.path.dirname(path)
    return os.path.realpath(d) == d


LOAD_PROPS = (
    prop("Hidden", True),
    prop("ReadOnly", True),
    prop("MacroExecutionMode", uno.getConstantByName("com.sun.star.document.MacroExecMode.NEVER_EXECUTE")),
    prop("UpdateDocMode", uno.getConstantByName("com.sun.star.document.UpdateDocMode.NO_UPDATE")),
)

# Import filters for inputs LibreOffice would otherwise guess at, by the
# extension the host named the input with (from the type it sniffed or the
# client declared). CSV: comma-separated, double-quoted, UTF-8 (76), from
# the first line, special numbers detected; text: UTF-8.
IMPORTS = {
    ".csv": ("Text - txt - csv (StarCalc)", "44,34,76,1,,0,false,true"),
    ".txt": ("Text (encoded)", "UTF8"),
}


class LoadError(Exception):
    """The document did not load; the message is the job's error."""


def odf_encrypted(path):
    """Whether path is an ODF package whose manifest lists encrypted parts."""
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("META-INF/manifest.xml")
            if info.file_size > 1 << 20:
                return False
            return b"encryption-data" in z.read(info)
    except Exception:
        return False


def load(desktop, src, opts):
    props = list(LOAD_PROPS)
    imp = IMPORTS.get(os.path.splitext(src)[1])
    if imp:
        props += [prop("FilterName", imp[0]), prop("FilterOptions", imp[1])]
    password = opts.get("password") or ""
    if password:
        props.append(prop("Password", password))
    try:
        doc = desktop.loadComponentFromURL(uno.systemPathToFileUrl(src), "_blank", 0, tuple(props))
    except Exception:
        # An encrypted OOXML file without its password fails type
        # detection ("type detection aborted"); others return None.
        doc = None
    if doc is not None:
        return doc
    if opts.get("encrypted") or odf_encrypted(src):
        if password:
            raise LoadError("the password does not open this password-protected document")
        raise LoadError("the document is password-protected: give its password in the password option")
    if password:
        raise LoadError("LibreOffice could not load the document: it is damaged, of a kind LibreOffice does not read, or the password is wrong")
    raise LoadError("LibreOffice could not load the document: it is damaged, of a kind LibreOffice does not read, or password-protected (then give its password in the password option)")


def turn_landscape(doc):
    """Every page style landscape; in presentations and drawings, every page."""
    if doc.supportsService("com.sun.star.drawing.GenericDrawingDocument"):
        pages = doc.getDrawPages()
        for i in range(pages.getCount()):
            p = pages.getByIndex(i)
            if p.Height > p.Width:
                p.Width, p.Height = p.Height, p.Width
        return
    styles = doc.getStyleFamilies().getByName("PageStyles")
    for name in styles.getElementNames():
        s = styles.getByName(name)
        if not s.IsLandscape:
            w, h = s.Width, s.Height
            s.IsLandscape = True
            s.Width, s.Height = max(w, h), min(w, h)


def filter_data(opts):
    """The PDF export's FilterData from the request's options."""
    fd = [prop("ExportFormFields", bool(opts.get("export_form_fields", True)))]
    if opts.get("quality"):
        fd.append(prop("Quality", int(opts["quality"])))
    if opts.get("max_image_resolution"):
        fd += [prop("ReduceImageResolution", True), prop("MaxImageResolution", int(opts["max_image_resolution"]))]
    if opts.get("page_range"):
        if not re.fullmatch(r"[0-9,-]{1,600}", opts["page_range"]):
            raise ValueError("page range %r is not pages and ranges" % opts["page_range"])
        fd.append(prop("PageRange", opts["page_range"]))
    if opts.get("single_page_sheets"):
        fd.append(prop("SinglePageSheets", True))
    if opts.get("pdf_a"):
        # PDF/A-1b, 2b or 3b: LibreOffice embeds the fonts, writes an sRGB
        # output intent and names the part in the XMP (pdfaid:part).
        if opts["pdf_a"] not in ("1", "2", "3"):
            raise ValueError("PDF/A part %r is not 1, 2 or 3" % opts["pdf_a"])
        fd.append(prop("SelectPdfVersion", int(opts["pdf_a"])))
    if opts.get("pdf_ua"):
        # PDF/UA-1: LibreOffice tags the document, shows its title and
        # names the part in the XMP (pdfuaid:part).
        fd += [prop("PDFUACompliance", True), prop("UseTaggedPDF", True)]
    return uno.Any("[]com.sun.star.beans.PropertyValue", tuple(fd))


def convert(desktop, src, dst, fmt, opts=None):
    opts = opts or {}
    if fmt != "pdf":
        raise ValueError("unsupported format %r" % fmt)
    if not under_tmp(src) or not under_tmp(dst):
        raise ValueError("input and output must be files under /tmp")
    if os.path.islink(src) or not os.path.isfile(src):
        raise ValueError("input is not a regular file")
    if os.path.lexists(dst):
        raise ValueError("output already exists")
    doc = load(desktop, src, opts)
    try:
        for service, flt in EXPORTS:
            if doc.supportsService(service):
                break
        else:
            raise RuntimeError("LibreOffice cannot export this kind of document to PDF")
        if opts.get("landscape"):
            turn_landscape(doc)
        uno.invoke(doc, "storeToURL", (uno.systemPathToFileUrl(dst),
                                       (prop("FilterName", flt), prop("FilterData", filter_data(opts)))))
    finally:
        try:
            doc.close(True)
        except Exception:
            doc.dispose()


def warmup_docx():
    """A one-paragraph Word document, so the first job's import is warm."""
    parts = {
        "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
        "</Types>",
        "_rels/.rels": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>'
        "</Relationships>",
        "word/document.xml": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        "<w:p><w:r><w:t>warm-up</w:t></w:r></w:p></w:body></w:document>",
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            z.writestr(name, text)
    return buf.getvalue()


def warm_up(desktop, workdir):
    src = os.path.join(workdir, "warmup.docx")
    dst = os.path.join(workdir, "warmup.pdf")
    with open(src, "wb") as f:
        f.write(warmup_docx())
    try:
        convert(desktop, src, dst, "pdf")
    finally:
        for p in (src, dst):
            if os.path.lexists(p):
                os.remove(p)


def answer(obj):
    _proto.write(json.dumps(obj) + "\n")
    _proto.flush()


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--no-warm-up"]):
        print("usage: office-bridge.py PIPE-NAME WORKDIR [--no-warm-up]", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        desktop = connect(sys.argv[1])
        t1 = time.monotonic()
        if sys.argv[3:] != ["--no-warm-up"]:
            warm_up(desktop, sys.argv[2])
        t2 = time.monotonic()
    except Exception as e:
        answer({"error": "booting: %s: %s" % (type(e).__name__, e)})
        return 1
    answer({"ready": True, "connect_ms": int((t1 - t0) * 1000), "warmup_ms": int((t2 - t1) * 1000)})
    for line in sys.stdin:
        try:
            req = json.loads(line)
            convert(desktop, req["input"], req["output"], req["format"], req.get("options"))
        except LoadError as e:
            answer({"error": str(e)})
        except Exception as e:  # every failure is the job's, answered as such
            answer({"error": "%s: %s" % (type(e).__name__, e)})
        else:
            answer({"ok": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
