"""pdf-mark: draw the mark pdf-watermark and pdf-stamp lay on a PDF's pages.

Usage: python3 -I pdf-mark.py INPUT.pdf OPTIONS.json MARK.pdf

Writes MARK.pdf with one page per page of INPUT.pdf, each the size of that
page as it is shown (its trim box, turned by its /Rotate), carrying the
text where OPTIONS.json puts it; qpdf then lays page N of the mark over
or under page N of the document (--overlay/--underlay), and fits it to
the page's trim box, upright as the page is shown. OPTIONS.json is the
validated options the host wrote as data (the text is never part of any
code): text, font, font_size, color (#rrggbb), opacity, rotation
(degrees, counterclockwise), position and margin_mm; or, for a PNG mark,
image (its path) and image_width_mm instead of the text and its font. Runs inside the
sandbox: INPUT.pdf is untrusted, and only its pages' boxes are read.
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


def main():
    src, opts_path, out = sys.argv[1:4]
    with open(opts_path, encoding="utf-8") as f:
        o = json.load(f)
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
        lines = o["text"].split("\n")
        width = max(pdfmetrics.stringWidth(l, font, size) for l in lines)
        height = size * LEADING * len(lines)
    a = math.radians(float(o["rotation"]))
    # The box the turned text takes, placed by position and margin.
    bw = abs(width * math.cos(a)) + abs(height * math.sin(a))
    bh = abs(width * math.sin(a)) + abs(height * math.cos(a))
    vertical, _, horizontal = o["position"].partition("-")
    if o["position"] in ("left", "right"):
        vertical, horizontal = "center", o["position"]
    elif o["position"] in ("top", "bottom", "center"):
        horizontal = "center"
    margin = float(o["margin_mm"]) * MM
    c = canvas.Canvas(out, pageCompression=1)
    c.setCreator("renderbox pdf-mark")
    with pikepdf.open(src) as pdf:
        for page in pdf.pages:
            w, h = shown_size(page)
            c.setPageSize((w, h))
            x = anchor({"left": "low", "right": "high"}.get(horizontal, "mid"), w, bw, margin)
            y = anchor({"bottom": "low", "top": "high"}.get(vertical, "mid"), h, bh, margin)
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
