"""svg-links: drop every link from Graphviz's SVG whose target is not
http(s), mailto or a fragment of the same document.

Usage: python3 -I svg-links.py IN.svg OUT.svg

Graphviz copies a node's URL/href attribute into xlink:href as written:
URL="javascript:alert(1)" becomes a live link in the SVG a client may open
in a browser. Graphviz writes every attribute as name="value" with the value
XML-escaped, so a pattern over its own output finds them all; the value is
unescaped, stripped of what browsers strip (ASCII whitespace and controls)
and its scheme compared, case-insensitively. Runs inside the sandbox: the
SVG is the renderer's, not yet trusted.
"""

import html
import re
import sys

ATTR = re.compile(r'\s(?:xlink:)?href="([^"]*)"')
SAFE = ("http://", "https://", "mailto:", "#")


def keep(value):
    v = html.unescape(value)
    v = "".join(c for c in v if ord(c) > 0x20 and ord(c) != 0x7F).lower()
    return v.startswith(SAFE)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        svg = f.read()
    out = ATTR.sub(lambda m: m.group(0) if keep(m.group(1)) else "", svg)
    with open(dst, "x", encoding="utf-8") as f:
        f.write(out)


if __name__ == "__main__":
    main()
