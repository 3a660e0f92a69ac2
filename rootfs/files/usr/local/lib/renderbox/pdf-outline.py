"""pdf-outline: a PDF's bookmarks (its outline), read and written.

Usage: python3 -I pdf-outline.py merge MERGED.pdf OUTLINE.json OUTPUT.pdf
       python3 -I pdf-outline.py read INPUT.pdf BOOKMARKS.json
       python3 -I pdf-outline.py write INPUT.pdf BOOKMARKS.json OUTPUT.pdf

read writes {"bookmarks": [{"title", "page" (from 1; absent when the
bookmark does not go to a page of the document), "children"}]}; write
replaces the outline with such a list (validated by the host, data, never
code). merge is pdf-merge's:

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


MAX_ITEMS = 10000


def page_of(pdf, pages, target, depth=0):
    """The page index (from 0) a destination or GoTo action goes to, or None."""
    if depth > 8 or target is None:
        return None
    if isinstance(target, pikepdf.Dictionary):
        if target.get("/S") == pikepdf.Name.GoTo:
            return page_of(pdf, pages, target.get("/D"), depth + 1)
        if "/D" in target:  # a named destination's dictionary form
            return page_of(pdf, pages, target.get("/D"), depth + 1)
        return None
    if isinstance(target, pikepdf.Array):
        if len(target) == 0:
            return None
        first = target[0]
        if isinstance(first, pikepdf.Dictionary):
            return pages.get(first.objgen)
        if isinstance(first, int) and 0 <= int(first) < len(pdf.pages):
            return int(first)  # a remote-style page number
        return None
    if isinstance(target, pikepdf.Name):
        dests = pdf.Root.get("/Dests")
        return page_of(pdf, pages, dests.get(str(target)) if dests is not None else None, depth + 1)
    if isinstance(target, pikepdf.String):
        names = pdf.Root.get("/Names")
        if names is None or "/Dests" not in names:
            return None
        try:
            tree = pikepdf.NameTree(names.Dests)
            return page_of(pdf, pages, tree.get(str(target)), depth + 1)
        except Exception:  # a damaged name tree: no page, not a failure
            return None
    return None


def read(src, out):
    with pikepdf.open(src) as pdf:
        pages = {p.obj.objgen: i for i, p in enumerate(pdf.pages)}
        count = [0]

        def items(level):
            out = []
            for item in level:
                count[0] += 1
                if count[0] > MAX_ITEMS:
                    break
                entry = {"title": item.title}
                page = page_of(pdf, pages, item.destination if item.destination is not None else item.action)
                if page is not None:
                    entry["page"] = page + 1
                if item.children:
                    entry["children"] = items(item.children)
                out.append(entry)
            return out

        with pdf.open_outline() as outline:
            marks = items(outline.root)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"bookmarks": marks}, f, ensure_ascii=False, indent=1)


def write(src, data, out):
    with open(data, encoding="utf-8") as f:
        marks = json.load(f)
    with pikepdf.open(src) as pdf:
        n = len(pdf.pages)

        def items(level):
            out = []
            for m in level:
                if m["page"] > n:
                    sys.exit(f"the bookmark {m['title']!r} goes to page {m['page']}; the document has {n}")
                item = pikepdf.OutlineItem(m["title"], m["page"] - 1)
                item.children.extend(items(m.get("children", [])))
                out.append(item)
            return out

        with pdf.open_outline() as outline:
            outline.root.clear()
            outline.root.extend(items(marks))
        pdf.Root.PageMode = pikepdf.Name.UseOutlines
        pdf.save(out)


def main():
    cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "merge" and len(args) == 3:
        merge(*args)
    elif cmd == "read" and len(args) == 2:
        read(*args)
    elif cmd == "write" and len(args) == 3:
        write(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
