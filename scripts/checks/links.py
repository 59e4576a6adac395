"""The link check behind scripts/checks/links (see there). Exits 1 naming each bad link."""
import pathlib
import re
import sys

ROOT = pathlib.Path.cwd().resolve()
LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def files():
    yield from (ROOT / n for n in ("README.md", "ARCHITECTURE.md") if (ROOT / n).exists())
    yield from sorted((ROOT / "docs").rglob("*.md"))
    yield from sorted(ROOT.glob("crates/*/README.md"))
    yield from sorted(ROOT.glob("fuzz/README.md"))
    yield from sorted(ROOT.glob("packaging/**/*.md"))
    yield from sorted(ROOT.glob("scripts/**/*.md"))


def prose(text, keep_code=False):
    """The lines outside fenced code blocks, with inline code removed (kept for headings,
    whose anchors include it)."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line if keep_code else re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        for _, line in prose(path.read_text(encoding="utf-8"), keep_code=True):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
        for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text(encoding="utf-8")):
            out.add(m.group(1))
        cache[path] = out
    return cache[path]


def check(path):
    bad, external, local = [], 0, 0
    for number, line in prose(path.read_text(encoding="utf-8")):
        for m in list(LINK.finditer(line)) + list(IMAGE.finditer(line)):
            target = m.group(1)
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                external += target.startswith(("http://", "https://"))
                if not target.startswith(("http://", "https://", "mailto:")):
                    bad.append(f"{where}: unknown scheme")
                continue
            local += 1
            file_part, _, fragment = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if ROOT not in dest.parents and dest != ROOT:
                bad.append(f"{where}: points outside the repository")
                continue
            if not dest.exists():
                bad.append(f"{where}: no such file")
                continue
            if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                bad.append(f"{where}: no heading #{fragment} in {dest.relative_to(ROOT)}")
    return bad, external, local


def main():
    bad, external, local, count = [], 0, 0, 0
    for path in files():
        b, e, l = check(path)
        bad += b
        external += e
        local += l
        count += 1
    for line in bad:
        print(f"bad link: {line}", file=sys.stderr)
    print(f"links: {count} files, {local} links inside the repository, {external} external (not fetched), {len(bad)} bad")
    if count == 0 or local == 0:
        print("links: nothing was checked", file=sys.stderr)
        return 1
    return 1 if bad else 0


sys.exit(main())
