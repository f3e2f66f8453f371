#!/usr/bin/env python3
"""Checks the relative links of the project's Markdown files: every linked file exists, and
every #anchor names a heading of the file it points into (GitHub's rule: lower case, spaces to
hyphens, punctuation other than hyphens and underscores dropped; a repeated heading gets -1,
-2...). Exits 1 naming each broken link. Run by scripts/test.sh; on its own:
    python3 scripts/check_links.py [FILE.md...]   # default: every tracked *.md
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path):
    """The lines of `path` outside fenced code blocks."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield number, line


def anchors(path):
    seen = {}
    result = set()
    for _, line in prose_lines(path):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda g: g.group(1) or "", m.group(2))
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f"{slug}-{n}")
    return result


def main(files):
    if not files:
        files = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True,
                               check=True).stdout.split()
    broken = []
    cache = {}
    for path in files:
        for number, line in prose_lines(path):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                if not os.path.exists(dest):
                    broken.append(f"{path}:{number}: {target}: no such file {dest}")
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        broken.append(f"{path}:{number}: {target}: no heading #{anchor} in {dest}")
    for b in broken:
        print(b, file=sys.stderr)
    print(f"check_links: {len(files)} files, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
