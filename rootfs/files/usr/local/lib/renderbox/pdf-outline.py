"""pdf-outline: bookmarks for pdf-merge.

Usage: python3 -I pdf-outline.py merge MERGED.pdf OUTLINE.json OUTPUT.pdf

OUTLINE.json is data the host wrote: {"inputs": [paths], "titles":
[titles]}, one title per input, in the merge's order. Writes OUTPUT.pdf:
MERGED.pdf with one top-level bookmark per input, titled as given, on the
input's first page (its page count read from the input itself). Runs
inside the sandbox: the inputs are untrusted, and of them only their page
counts are read.
"""

import json
import sys

import pikepdf


def merge(merged, outline_path, out):
    with open(outline_path, encoding="utf-8") as f:
        o = json.load(f)
    with pikepdf.open(merged) as pdf:
        first = 0
        with pdf.open_outline() as outline:
            outline.root.clear()
            for path, title in zip(o["inputs"], o["titles"]):
                with pikepdf.open(path) as part:
                    n = len(part.pages)
                if n == 0:
                    continue
                if first >= len(pdf.pages):
                    sys.exit("the merged document has fewer pages than its inputs")
                outline.root.append(pikepdf.OutlineItem(title, first))
                first += n
        pdf.Root.PageMode = pikepdf.Name.UseOutlines
        pdf.save(out)


def main():
    if len(sys.argv) != 5 or sys.argv[1] != "merge":
        sys.exit(__doc__)
    merge(*sys.argv[2:5])


if __name__ == "__main__":
    main()
