#!/usr/bin/env python3
"""The public API of each published crate, read from rustdoc's HTML (see public-api.sh).

    public_api.py DOC_DIR API_DIR [--bless]

DOC_DIR is a `cargo doc` output folder (`<target>/doc`). One line per item or member,
`<path>: <declaration>`, sorted:

    tablekit_core::model::Entity: pub struct Entity
    tablekit_core::model::Entity::new: pub fn new(partition_key: impl Into<String>, ...) -> Self
    tablekit_core::model::Entity::row_key: row_key: String
    tablekit_core::model::Entity: impl Clone for Entity

Items come from the crate's `all.html`, modules and re-exports from its module pages
(followed from `index.html`, so stale pages of removed items are never read), members and
impl headers from each item page's `code-header` elements. Auto trait and blanket
implementations are left out, and so are the methods of trait implementations (the trait
defines them); their associated types and constants are kept.

Standard library only.
"""

import difflib
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

# (package, rustdoc folder), the published library crates.
CRATES = [
    ("tablekit-core", "tablekit_core"),
    ("tablekit-derive", "tablekit_derive"),
    ("tablekit-patterns", "tablekit_patterns"),
    ("tablekit-workers", "tablekit_workers"),
    ("tablekit", "tablekit"),
]

# Elements that end a line: rustdoc puts attributes (`#[non_exhaustive]`) and where
# clauses in them.
BLOCK = {"br", "dd", "div", "dt", "li", "p"}

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr"}

# Sections of an item page that are not the item's own API.
SKIPPED_SECTIONS = ("synthetic-implementations", "blanket-implementations", "deref-methods",
                    "aliased-type")

MEMBER_ID = re.compile(r"^(method|tymethod|associatedtype|associatedconstant)\.([A-Za-z0-9_]+)")


class Node:
    __slots__ = ("tag", "attrs", "children")

    def __init__(self, tag, attrs):
        self.tag = tag
        self.attrs = attrs
        self.children = []

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        out = []
        stack = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, str):
                out.append(node)
            else:
                stack.extend(reversed(node.children))
        return "".join(out)

    def walk(self):
        """Every element below this one, in document order."""
        stack = list(reversed(self.children))
        while stack:
            node = stack.pop()
            if isinstance(node, Node):
                yield node
                stack.extend(reversed(node.children))

    def find(self, pred):
        return next((n for n in self.walk() if pred(n)), None)


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        if tag in BLOCK:
            self.stack[-1].children.append("\n")
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, dict(attrs)))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                if tag in BLOCK:
                    self.stack[-1].children.append("\n")
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse_main(path):
    """The page's main content as a tree (the sidebar and scripts are not read)."""
    html = path.read_text(encoding="utf-8")
    start = html.find('<section id="main-content"')
    end = html.find("</main>", start)
    builder = TreeBuilder()
    builder.feed(html[start:end] if start >= 0 else html)
    builder.close()
    return builder.root


def norm(text):
    """One line: whitespace collapsed, rustdoc's line wrapping inside brackets undone."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"([(\[]) ", r"\1", text)
    text = re.sub(r",? ([)\]])", r"\1", text)
    # A where clause's last bound ends with a comma.
    return text.removesuffix(",")


def code_header(node):
    header = node.find(lambda n: "code-header" in n.classes())
    return norm(header.text()) if header else None


def item_lines(path, kind, page):
    """The item's declaration, then its members and implementation headers."""
    root = parse_main(page)
    lines = []
    decl = root.find(lambda n: n.tag == "pre" and "item-decl" in n.classes())
    if decl is not None:
        text = norm(decl.text())
        if kind in ("struct", "enum", "union", "trait"):
            # The body is listed member by member below.
            text = text.split("{", 1)[0].strip()
        lines.append(f"{path}: {text}")
    if kind == "type":
        # The aliased type's own page lists its members.
        return lines

    section = None
    impl_header = None
    for node in root.walk():
        node_id = node.attrs.get("id") or ""
        classes = node.classes()
        if node.tag == "h2" and "section-header" in classes:
            section = node_id
            impl_header = None
            continue
        if section is None or section.startswith(SKIPPED_SECTIONS):
            continue
        if node.tag == "section" and "impl" in classes:
            impl_header = code_header(node)
            lines.append(f"{path}: {impl_header}")
        elif node.tag == "section" and (m := MEMBER_ID.match(node_id)):
            member_kind, name = m.groups()
            header = code_header(node)
            if "trait-impl" in classes or section in ("trait-implementations", "foreign-impls"):
                # Methods are the trait's; associated types and constants say what the
                # implementation chose.
                if member_kind != "method":
                    lines.append(f"{path}: {impl_header}: {header}")
            else:
                lines.append(f"{path}::{name}: {header}")
        elif node.tag == "section" and node_id.startswith("variant."):
            lines.append(f"{path}::{node_id[len('variant.'):]}: {code_header(node)}")
        elif node.tag == "span" and (node_id.startswith("structfield.")
                                     or re.match(r"variant\.[^.]+\.field\.", node_id)):
            code = node.find(lambda n: n.tag == "code")
            member = node_id.split(".", 1)[1].replace(".field.", "::")
            lines.append(f"{path}::{member}: {norm(code.text() if code else node.text())}")
    return lines


def module_lines(doc, crate):
    """Modules and re-exports, following the module pages from the crate's index."""
    lines = []
    todo = [(crate, doc / crate / "index.html")]
    seen = set()
    while todo:
        path, page = todo.pop()
        page = page.resolve()
        if page in seen or not page.exists():
            continue
        seen.add(page)
        root = parse_main(page)
        section = None
        for node in root.walk():
            classes = node.classes()
            if node.tag == "h2" and "section-header" in classes:
                section = node.attrs.get("id")
            elif section == "modules" and node.tag == "a" and "mod" in classes:
                name = norm(node.text())
                lines.append(f"{path}::{name}: pub mod {name}")
                todo.append((f"{path}::{name}", page.parent / node.attrs["href"]))
            elif section == "reexports" and node.tag == "dt":
                lines.append(f"{path}: {norm(node.text())}")
    return lines


def crate_api(doc, crate):
    lines = module_lines(doc, crate)
    root = parse_main(doc / crate / "all.html")
    for link in root.walk():
        if link.tag != "a" or "href" not in link.attrs:
            continue
        href = link.attrs["href"]
        m = re.search(r"(?:^|/)([a-z]+)\.[^/]+\.html$", href)
        if not m or href.startswith(("http", "#", "..")):
            continue
        path = f"{crate}::{norm(link.text()).replace(' ', '')}"
        lines.extend(item_lines(path, m.group(1), doc / crate / href))
    return sorted(set(lines))


def main(argv):
    bless = "--bless" in argv
    args = [a for a in argv if a != "--bless"]
    if len(args) != 2:
        sys.exit(__doc__)
    doc, api = Path(args[0]), Path(args[1])
    if bless:
        api.mkdir(parents=True, exist_ok=True)
    changed = []
    for package, crate in CRATES:
        if not (doc / crate / "all.html").exists():
            sys.exit(f"error: no documentation of {package} in {doc}")
        new = [line + "\n" for line in crate_api(doc, crate)]
        file = api / f"{package}.txt"
        old = file.read_text(encoding="utf-8").splitlines(keepends=True) if file.exists() else []
        if bless:
            if new != old:
                file.write_text("".join(new), encoding="utf-8")
            print(f"{file}: {len(new)} lines")
        elif new != old:
            changed.append(package)
            sys.stdout.writelines(difflib.unified_diff(
                old, new, fromfile=f"{file} (checked in)", tofile=f"{file} (this tree)"))
    if changed:
        print(f"\nerror: the public API of {', '.join(changed)} differs from api/.\n"
              "run scripts/public-api.sh --bless and commit api/ if the change is deliberate",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
