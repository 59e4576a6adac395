"""The figures check behind scripts/checks/figures (see there). Exits 1 naming each figure
of README.md's "Headline numbers" table that its pages do not state with the same value.

Usage: figures.py [README]  (the README to read; README.md by default)"""
import pathlib
import re
import sys

HEADING = "## Headline numbers"
# A figure: digits with optional thousands commas and decimals, and an optional unit or
# suffix glued to it (x, s, m..s durations such as 28m14s).
FIGURE = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:m\d+s|x|s)?(?![\w])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def table_rows(text):
    """The data rows of the first table after HEADING, as lists of cells."""
    lines = text[text.index(HEADING):].splitlines()[1:]
    rows, started = [], False
    for line in lines:
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif started:
            break
    return rows[1:]  # the header row names the columns


def figures(cell):
    """The figures of a cell outside its links' targets."""
    cell = LINK.sub("]", cell)
    return [m.group(0) for m in FIGURE.finditer(cell)]


def main():
    readme = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    text = readme.read_text(encoding="utf-8")
    if HEADING not in text:
        print(f"{readme}: no {HEADING!r} section")
        return 1
    bad, checked = [], 0
    for row in table_rows(text):
        pages = [pathlib.Path("docs/benchmarks.md")]
        for cell in row:
            pages += [readme.parent / t for t in LINK.findall(cell) if t.endswith(".md")]
        corpus = " ".join(p.read_text(encoding="utf-8") for p in pages if p.exists())
        corpus = re.sub(r"\s+", " ", corpus)
        for cell in row[1:]:
            for fig in figures(cell):
                checked += 1
                if not re.search(r"(?<![\w.,])" + re.escape(fig) + r"(?![\w]|\.\d|,\d)", corpus):
                    names = ", ".join(str(p) for p in pages)
                    bad.append(f"{readme}: {row[0]!r}: {fig} is not in {names}")
    for b in bad:
        print(b)
    print(f"figures: {checked} figures of the headline table, {len(bad)} not found on their pages")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
