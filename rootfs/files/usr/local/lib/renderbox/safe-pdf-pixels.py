"""safe-pdf-pixels: draw a PDF's pages as raw netpbm frames for safe-pdf,
after checking its page count and page sizes against the job's limits.

Usage: python3 -I safe-pdf-pixels.py PDF OUTPREFIX DPI MAX_PAGES MAX_PIXELS MAX_SIDE rgb|gray

pdfinfo reads the page count and each page's size; a document of more than
MAX_PAGES pages, or a page that at DPI would be more than MAX_PIXELS pixels
or MAX_SIDE a side, fails with a message saying which and what to lower,
before anything is drawn. Then one pdftoppm draws every page as
OUTPREFIX-N.ppm (P6) or .pgm (P5), still cropped at MAX_SIDE a side. Runs
inside the sandbox, as the renderer: the document is untrusted, and so is
everything written here; the host checks the frames again.
"""

import math
import re
import subprocess
import sys

SIZE = re.compile(r"^Page\s+(\d+) size:\s+([0-9.]+) x ([0-9.]+) pts", re.M)
PAGES = re.compile(r"^Pages:\s+(\d+)\s*$", re.M)


def fail(msg):
    print("safe-pdf: " + msg, file=sys.stderr)
    sys.exit(1)


def pdfinfo(*args):
    p = subprocess.run(["/usr/bin/pdfinfo", *args], capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
        fail("pdfinfo cannot read the document (exit status %d)" % p.returncode)
    return p.stdout


def main():
    pdf, prefix, dpi, max_pages, max_pixels, max_side, mode = sys.argv[1:8]
    dpi, max_pages, max_pixels, max_side = int(dpi), int(max_pages), int(max_pixels), int(max_side)
    m = PAGES.search(pdfinfo(pdf))
    if not m:
        fail("pdfinfo gives no page count")
    pages = int(m.group(1))
    if pages == 0:
        fail("the document has no page")
    if pages > max_pages:
        fail("the document has %d pages, more pages than max_pages, %d" % (pages, max_pages))
    for n, w, h in SIZE.findall(pdfinfo("-f", "1", "-l", str(pages), pdf)):
        pw, ph = math.ceil(float(w) * dpi / 72), math.ceil(float(h) * dpi / 72)
        if pw > max_side or ph > max_side or pw * ph > max_pixels:
            fail("page %s is %s × %s pt: at %d dpi that is %d × %d pixels, over the limit of %d pixels "
                 "(max_pixels) or %d a side; lower dpi" % (n, w, h, dpi, pw, ph, max_pixels, max_side))
    argv = ["/usr/bin/pdftoppm", "-r", str(dpi), "-f", "1", "-l", str(pages),
            "-W", str(max_side), "-H", str(max_side)]
    if mode == "gray":
        argv.append("-gray")
    sys.exit(subprocess.run(argv + [pdf, prefix]).returncode)


if __name__ == "__main__":
    main()
