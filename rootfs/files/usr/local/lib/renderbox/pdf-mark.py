"""pdf-mark: draw the mark pdf-watermark and pdf-stamp lay on a PDF's pages.

Usage: python3 -I pdf-mark.py INPUT.pdf OPTIONS.json MARK.pdf

Writes MARK.pdf with one page per page of INPUT.pdf, each the size of that
page as it is shown (its trim box, turned by its /Rotate), carrying the
text where OPTIONS.json puts it; qpdf then lays page N of the mark over
or under page N of the document (--overlay/--underlay), and fits it to
the page's trim box, upright as the page is shown. OPTIONS.json is the
validated options the host wrote as data (the text is never part of any
code; {page}, {pages} and {date} in it become the page's number, the
document's page count and the job's date, YYYY-MM-DD, as the host wrote
it), font, font_size, color (#rrggbb), opacity, rotation
(degrees, counterclockwise), position and margin_mm; or, for a PNG or PDF
mark, image (its path) and image_width_mm instead of the text and its font
(of a PDF, its first page, as it is shown, is the mark). Runs inside the
sandbox: INPUT.pdf and the mark are untrusted; of INPUT.pdf only its pages'
boxes are read.
"""

import json
import math
import sys

import pikepdf
from reportlab.lib.colors import HexColor
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

FONTS = {
    "sans": "DejaVuSans.ttf", "sans-bold": "DejaVuSans-Bold.ttf",
    "serif": "DejaVuSerif.ttf", "serif-bold": "DejaVuSerif-Bold.ttf",
    "mono": "DejaVuSansMono.ttf", "mono-bold": "DejaVuSansMono-Bold.ttf",
}
FONT_DIR = "/usr/share/fonts/truetype/dejavu/"
MM = 72 / 25.4
LEADING = 1.2


def inherited(page, key):
    """A page attribute, looked up its /Parent chain as PDF 1.7, 7.7.3.4, says."""
    node, seen = page, 0
    while isinstance(node, pikepdf.Dictionary) and seen < 64:
        if key in node:
            return node[key]
        node, seen = node.get("/Parent"), seen + 1
    return None


def shown_size(page):
    """The page's width and height as a viewer shows it."""
    box = [float(x) for x in page.trimbox]
    w, h = abs(box[2] - box[0]), abs(box[3] - box[1])
    try:
        rot = int(inherited(page.obj, "/Rotate") or 0) % 360
    except (TypeError, ValueError):
        rot = 0
    return (h, w) if rot in (90, 270) else (w, h)


def anchor(position, size, extent, margin):
    """Where the mark's centre goes along one axis."""
    if position == "low":
        return margin + extent / 2
    if position == "high":
        return size - margin - extent / 2
    return size / 2


def placement(o, width, height, w, h):
    """The centre of the mark's turned box on a page of w by h points."""
    a = math.radians(float(o["rotation"]))
    bw = abs(width * math.cos(a)) + abs(height * math.sin(a))
    bh = abs(width * math.sin(a)) + abs(height * math.cos(a))
    vertical, _, horizontal = o["position"].partition("-")
    if o["position"] in ("left", "right"):
        vertical, horizontal = "center", o["position"]
    elif o["position"] in ("top", "bottom", "center"):
        horizontal = "center"
    margin = float(o["margin_mm"]) * MM
    x = anchor({"left": "low", "right": "high"}.get(horizontal, "mid"), w, bw, margin)
    y = anchor({"bottom": "low", "top": "high"}.get(vertical, "mid"), h, bh, margin)
    return x, y


def form_extent(form):
    """A form XObject's box as drawn: its /BBox through its /Matrix."""
    x0, y0, x1, y1 = [float(v) for v in form.BBox]
    m = [float(v) for v in form.get("/Matrix", [1, 0, 0, 1, 0, 0])]
    xs, ys = [], []
    for px, py in ((x0, y0), (x0, y1), (x1, y0), (x1, y1)):
        xs.append(m[0] * px + m[2] * py + m[4])
        ys.append(m[1] * px + m[3] * py + m[5])
    return min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)


def pdf_mark(src, o, out):
    """A PDF mark: its first page, as a form XObject, drawn on each page."""
    with pikepdf.open(o["image"]) as mark, pikepdf.open(src) as pdf, pikepdf.new() as dest:
        if len(mark.pages) == 0:
            sys.exit("the mark PDF has no pages")
        form = dest.copy_foreign(pikepdf.Page(mark.pages[0]).as_form_xobject())
        fx, fy, fw, fh = form_extent(form)
        if fw <= 0 or fh <= 0:
            sys.exit("the mark PDF's first page has no area")
        width = float(o["image_width_mm"]) * MM
        scale = width / fw
        a = math.radians(float(o["rotation"]))
        cos, sin = math.cos(a) * scale, math.sin(a) * scale
        opacity = float(o["opacity"])
        state = dest.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.ExtGState, CA=opacity, ca=opacity))
        for page in pdf.pages:
            w, h = shown_size(page)
            x, y = placement(o, width, fh * scale, w, h)
            blank = dest.add_blank_page(page_size=(w, h))
            blank.Resources = pikepdf.Dictionary(XObject=pikepdf.Dictionary(M=form), ExtGState=pikepdf.Dictionary(G=state))
            ops = "q /G gs %.6f %.6f %.6f %.6f %.4f %.4f cm 1 0 0 1 %.4f %.4f cm /M Do Q" % (
                cos, sin, -sin, cos, x, y, -(fx + fw / 2), -(fy + fh / 2))
            blank.Contents = dest.make_stream(ops.encode())
        dest.save(out)


def is_pdf(path):
    with open(path, "rb") as f:
        return f.read(5) == b"%PDF-"


def main():
    src, opts_path, out = sys.argv[1:4]
    with open(opts_path, encoding="utf-8") as f:
        o = json.load(f)
    if "image" in o and is_pdf(o["image"]):
        # The host took the mark as a PNG or a PDF; a PDF is read only here.
        pdf_mark(src, o, out)
        return
    font, image = "Mark", None
    size = float(o["font_size"])
    if "image" in o:
        # A PNG the host sniffed and bounded (pixels) before the job.
        image = ImageReader(o["image"])
        iw, ih = image.getSize()
        width = float(o["image_width_mm"]) * MM
        height = width * ih / iw
    else:
        pdfmetrics.registerFont(TTFont(font, FONT_DIR + FONTS[o["font"]]))
    c = canvas.Canvas(out, pageCompression=1)
    c.setCreator("renderbox pdf-mark")
    with pikepdf.open(src) as pdf:
        pages = len(pdf.pages)
        for number, page in enumerate(pdf.pages, start=1):
            if image is None:
                # Each page its own text: its number, the page count, the date.
                text = (o["text"].replace("{page}", str(number)).replace("{pages}", str(pages))
                        .replace("{date}", o.get("date", "")))
                lines = text.split("\n")
                width = max(pdfmetrics.stringWidth(l, font, size) for l in lines)
                height = size * LEADING * len(lines)
            w, h = shown_size(page)
            c.setPageSize((w, h))
            # The box the turned mark takes, placed by position and margin.
            x, y = placement(o, width, height, w, h)
            c.saveState()
            c.setFillColor(HexColor(o["color"]))
            c.setFillAlpha(float(o["opacity"]))
            c.translate(x, y)
            c.rotate(float(o["rotation"]))
            if image is not None:
                c.drawImage(image, -width / 2, -height / 2, width, height, mask="auto")
                c.restoreState()
                c.showPage()
                continue
            c.setFont(font, size)
            # Lines centred on the mark's centre, the first on top.
            top = height / 2 - size
            for i, line in enumerate(lines):
                c.drawCentredString(0, top - i * size * LEADING + size * (LEADING - 1) / 2, line)
            c.restoreState()
            c.showPage()
    c.save()


if __name__ == "__main__":
    main()
