#!/usr/bin/env python3
"""Check that every relative link and #anchor of the documentation resolves.

    python3 docs/check-links.py              the Markdown: README.md, the book's
                                             chapters (docs/src) and every other
                                             Markdown file of the repository
    python3 docs/check-links.py docs/book    the same, then the book as mdbook
                                             built it: every href and src of its
                                             HTML pages, against its files and
                                             their element ids

mdbook does not check links. A link is broken when its file does not exist,
or when its #anchor is no heading of the Markdown file it names (GitHub's and
mdbook's ids: the heading's text, lowercased, spaces to hyphens, punctuation
dropped; a repeated heading gets -1, -2, …) or no id of the HTML page it
names. A link of the book that leaves it (../../jobs/README.md, which mdbook
writes as ../../jobs/README.html) is checked against the repository's file.
Links with a scheme (https:, mailto:) are not fetched. Each SVG of the book
must also parse as XML (a browser draws nothing of a malformed one).

Exits 1 naming each broken link, 0 when there is none."""

import html.parser
import os
import posixpath
import re
import sys
import xml.etree.ElementTree as ElementTree

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# Directories that hold no documentation of the repository's own.
SKIP_DIRS = {"target", "node_modules", "__pycache__"}
# The book as built: checked as HTML, when named.
BUILT = os.path.join(ROOT, "docs", "book")


def slug(text):
    """The id GitHub and mdbook give a heading of this text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def prose(text):
    """The text of a Markdown file outside fenced code blocks, line by line
    (None for a fenced line), with inline code spans blanked."""
    fence = None
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            yield None
            continue
        m = re.match(r"(`{3,}|~{3,})", stripped)
        if m:
            fence = m.group(1)
            yield None
            continue
        yield re.sub(r"(`+)(.+?)\1", lambda c: " " * len(c.group(0)), line)


_anchors = {}


def md_anchors(path):
    """The ids of a Markdown file's headings."""
    if path not in _anchors:
        ids, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            lines = list(prose(f.read()))
        with open(path, encoding="utf-8") as f:
            raw = f.read().split("\n")
        for line, original in zip(lines, raw):
            if line is None:
                continue
            m = re.match(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", original)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else f"{base}-{n}")
        for m in re.finditer(r'<a\s+(?:id|name)="([^"]+)"', "\n".join(raw)):
            ids.add(m.group(1))
        _anchors[path] = ids
    return _anchors[path]


LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def check_target(source, base_dir, target, errors, html_ids=None):
    """Check one relative `target` linked from `source` (resolved against
    `base_dir`). `html_ids(path)` gives an HTML page's ids, for the book."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
        return
    path, _, frag = target.partition("#")
    path = path.split("?")[0]
    full = os.path.normpath(os.path.join(base_dir, path)) if path else source
    rel = os.path.relpath(full, ROOT)
    if rel.startswith(".."):
        errors.append(f"{os.path.relpath(source, ROOT)}: {target}: outside the repository")
        return
    if not os.path.exists(full):
        # mdbook writes a link to a Markdown file outside the book as .html
        alt = full[: -len(".html")] + ".md" if full.endswith(".html") else None
        if html_ids and alt and os.path.exists(alt):
            full = alt
        else:
            errors.append(f"{os.path.relpath(source, ROOT)}: {target}: no such file {rel}")
            return
    if os.path.isdir(full):
        if html_ids and os.path.exists(os.path.join(full, "index.html")):
            full = os.path.join(full, "index.html")
        else:
            return
    if not frag:
        return
    if full.endswith(".md"):
        ids = md_anchors(full)
    elif full.endswith(".html") and html_ids:
        ids = html_ids(full)
    else:
        return
    if frag not in ids:
        errors.append(
            f"{os.path.relpath(source, ROOT)}: {target}: no anchor #{frag} in "
            f"{os.path.relpath(full, ROOT)}"
        )


def check_markdown(errors):
    """Every Markdown file of the repository, the book's sources included."""
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS
            and not d.startswith(".")
            and os.path.join(dirpath, d) != BUILT
        )
        for name in sorted(filenames):
            if not name.endswith(".md"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                text = "\n".join(line if line is not None else "" for line in prose(f.read()))
            for m in LINK.finditer(text):
                check_target(path, dirpath, m.group(1), errors)


class Page(html.parser.HTMLParser):
    """The ids and the links of one HTML page."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None and tag in ("a", "link", "img", "script", "iframe"):
                self.links.append(attrs[key])


def check_book(book, errors):
    """Every page mdbook built, and the SVG files it holds."""
    pages = {}

    def page(path):
        if path not in pages:
            parser = Page()
            with open(path, encoding="utf-8") as f:
                parser.feed(f.read())
            pages[path] = parser
        return pages[path]

    count = 0
    for dirpath, dirnames, filenames in os.walk(book):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.endswith(".svg"):
                try:
                    ElementTree.parse(path)
                except ElementTree.ParseError as e:
                    errors.append(f"{os.path.relpath(path, ROOT)}: not well-formed XML: {e}")
            if not name.endswith(".html"):
                continue
            count += 1
            for link in page(path).links:
                if link in ("", "#"):
                    continue
                check_target(path, dirpath, link, errors, lambda p: page(p).ids)
    if count == 0:
        errors.append(f"{os.path.relpath(book, ROOT)}: no HTML page: run `mdbook build docs` first")


def main():
    errors = []
    check_markdown(errors)
    for book in sys.argv[1:]:
        check_book(os.path.abspath(book), errors)
    for error in errors:
        print(f"broken link: {error}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} broken links", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
