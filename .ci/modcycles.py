#!/usr/bin/env python3
"""Module dependency cycles of the natsd library crate, and the routing-core check.

The graph: one node per module compiled into the library (followed from src/lib.rs through
`mod x;` declarations; `#[cfg(test)]` items and modules are left out unless --tests), one edge
m -> n when m's code names a path into n: `crate::n::...`, `super::...`, `self::...`, or a
child module of m by its bare name (`child::f()`, `use child::X`). Comments and string
literals are ignored. A path names the longest module prefix it has (`crate::a::b::C` is an
edge to `a::b` when that module exists, else to `a`). Inline `mod x { ... }` blocks count as
their file's module.

Usage:
  .ci/modcycles.py [SRC] [--tests] [--all] [--edges a,b,c]
    --all    print every strongly connected component of more than one module
    --edges  print the outgoing edges of the named modules

The check (exit status 1 when it fails): no routing-core module (CORE below, with its
submodules) is in a cycle with `server` or with any module that depends on `server`, directly
or not. The core is what fans messages out and holds interest; it reaches the rest of the
server only through the `fabric::Fabric` trait (docs/architecture.md).
"""

import argparse
import os
import re
import sys
from collections import defaultdict, deque

# The routing core (each with its submodules).
CORE = ["account", "sublist", "subject", "deliver", "imports", "conn", "proto", "internal", "fabric"]
SERVER = "server"


def strip_comments_and_strings(src):
    """The source with comments removed and string/char literals emptied (same line count
    is not kept; only tokens matter)."""
    out = []
    i, n = 0, len(src)
    char_lit = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])'")
    raw_str = re.compile(r'r(#*)"')

    def ident_char(c):
        return c.isalnum() or c == "_"

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
            continue
        if c == "r" and (i == 0 or not ident_char(src[i - 1]) or
                         (src[i - 1] == "b" and (i < 2 or not ident_char(src[i - 2])))):
            m = raw_str.match(src, i)
            if m:
                end = src.find('"' + m.group(1), m.end())
                i = n if end < 0 else end + 1 + len(m.group(1))
                out.append('""')
                continue
        if c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
            continue
        if c == "'":
            m = char_lit.match(src, i)
            if m:
                i = m.end()
                out.append("' '")
                continue
        out.append(c)
        i += 1
    return "".join(out)


TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|::|\S")


def tokenize(src):
    return TOKEN.findall(strip_comments_and_strings(src))


def skip_attr(toks, i):
    """toks[i] == '#': index after the attribute `#[...]` / `#![...]`, and its tokens."""
    j = i + 1
    if j < len(toks) and toks[j] == "!":
        j += 1
    if j >= len(toks) or toks[j] != "[":
        return i + 1, []
    depth, k = 0, j
    while k < len(toks):
        if toks[k] == "[":
            depth += 1
        elif toks[k] == "]":
            depth -= 1
            if depth == 0:
                return k + 1, toks[j + 1:k]
        k += 1
    return k, toks[j + 1:]


def skip_item(toks, i):
    """Index after the item starting at toks[i] (up to its `;` or its matching `}`)."""
    depth = 0
    k = i
    while k < len(toks):
        t = toks[k]
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        elif t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if depth == 0:
                return k + 1
        elif t == ";" and depth == 0:
            return k + 1
        k += 1
    return k


def is_test_cfg(attr):
    return bool(attr) and attr[0] == "cfg" and "test" in attr and "not" not in attr


def parse_file(toks, with_tests):
    """(code tokens with test items removed, [(child module name, #[path] or None)])."""
    code, children = [], []
    i = 0
    pending_path = None
    while i < len(toks):
        if toks[i] == "#":
            end, attr = skip_attr(toks, i)
            if not with_tests and is_test_cfg(attr):
                # Skip further attributes, then the item.
                j = end
                while j < len(toks) and toks[j] == "#":
                    j, _ = skip_attr(toks, j)
                i = skip_item(toks, j)
                pending_path = None
                continue
            if attr[:2] == ["path", "="]:
                pending_path = "?"  # a string literal, emptied: the name is unknown
            i = end
            continue
        t = toks[i]
        if t == "mod" and i + 2 < len(toks) and re.match(r"\w+$", toks[i + 1]) and toks[i + 2] == ";":
            children.append((toks[i + 1], pending_path))
            pending_path = None
        code.append(t)
        i += 1
    return code, children


def load(src_root, with_tests):
    """{module path: (code tokens, child names)} for the library crate."""
    mods = {}

    def file_for(dirpath, name):
        for cand in (os.path.join(dirpath, name + ".rs"), os.path.join(dirpath, name, "mod.rs")):
            if os.path.exists(cand):
                return cand
        return None

    def visit(modpath, path, child_dir):
        with open(path, encoding="utf-8") as f:
            code, children = parse_file(tokenize(f.read()), with_tests)
        names = []
        for name, custom in children:
            if custom:
                continue  # `#[path]` modules are test files here; not followed
            child = file_for(child_dir, name)
            if child is None:
                continue
            names.append(name)
            sub = f"{modpath}::{name}" if modpath else name
            sub_dir = os.path.dirname(child) if child.endswith("mod.rs") else os.path.join(child_dir, name)
            visit(sub, child, sub_dir)
        mods[modpath] = (code, names)

    visit("", os.path.join(src_root, "lib.rs"), src_root)
    return mods


def use_paths(code, start):
    """Every path (list of segments) starting at code[start] (`crate`, `super`, ...),
    with `use` groups `a::{b, c::d}` expanded. Returns (paths, index after)."""
    def parse(i, prefix):
        segs = list(prefix)
        while i < len(code):
            t = code[i]
            if t == "{":
                out = []
                i += 1
                while i < len(code) and code[i] != "}":
                    if code[i] == ",":
                        i += 1
                        continue
                    sub, i = parse(i, segs)
                    out.extend(sub)
                return out, i + 1
            if re.match(r"\w+$", t):
                if t != "self" or not segs:
                    segs.append(t)
                i += 1
                if i + 1 < len(code) and code[i] == "::":
                    i += 1
                    continue
                return [segs], i
            if t == "*":
                return [segs], i + 1
            return [segs], i
        return [segs], i

    return parse(start, [])


def graph(mods):
    g = defaultdict(set)
    for m, (code, children) in mods.items():
        parts = m.split("::") if m else []
        for i, t in enumerate(code):
            if i + 1 >= len(code) or code[i + 1] != "::":
                continue
            if i > 0 and code[i - 1] == "::":
                continue  # inside a longer path
            if t not in ("crate", "super", "self") and t not in children:
                continue
            paths, _ = use_paths(code, i)
            for p in paths:
                base, rest = list(parts), list(p)
                if rest and rest[0] == "crate":
                    base, rest = [], rest[1:]
                elif rest and rest[0] == "self":
                    rest = rest[1:]
                else:
                    while rest and rest[0] == "super":
                        base, rest = base[:-1], rest[1:]
                full = base + rest
                for k in range(len(full), 0, -1):
                    cand = "::".join(full[:k])
                    if cand in mods:
                        if cand != m:
                            g[m].add(cand)
                        break
    return g


def sccs(nodes, g):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        # Iterative Tarjan (module graphs are small, but recursion limits are not worth it).
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def path_to(g, src, targets):
    """A shortest module path from src to any of targets, or None."""
    prev = {src: None}
    q = deque([src])
    while q:
        v = q.popleft()
        if v in targets and v != src:
            out = [v]
            while prev[out[-1]] is not None:
                out.append(prev[out[-1]])
            return out[::-1]
        for w in sorted(g[v]):
            if w not in prev:
                prev[w] = v
                q.append(w)
    return None


def is_core(m):
    return any(m == c or m.startswith(c + "::") for c in CORE)


def main(argv):
    ap = argparse.ArgumentParser(description="natsd module cycles and the routing-core check")
    ap.add_argument("src", nargs="?",
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    ap.add_argument("--tests", action="store_true", help="include #[cfg(test)] code")
    ap.add_argument("--all", action="store_true", help="print every cycle (SCC)")
    ap.add_argument("--edges", default="", help="print these modules' edges (a,b,c)")
    a = ap.parse_args(argv)
    src = a.src
    mods = load(src, a.tests)
    g = graph(mods)
    nodes = [m for m in mods if m]
    comps = sccs(nodes, g)
    if a.all:
        for c in sorted((c for c in comps if len(c) > 1), key=len, reverse=True):
            print(len(c), c)
    for m in filter(None, a.edges.split(",")):
        print(m, "->", sorted(g[m]))
    if SERVER not in mods:
        print(f"modcycles: no module {SERVER!r} under {src}", file=sys.stderr)
        return 2
    # Modules that depend on `server`, directly or not (and `server` itself).
    rev = defaultdict(set)
    for v, ws in g.items():
        for w in ws:
            rev[w].add(v)
    on_server = {SERVER}
    q = deque([SERVER])
    while q:
        v = q.popleft()
        for w in rev[v]:
            if w not in on_server:
                on_server.add(w)
                q.append(w)
    bad = 0
    for comp in comps:
        core = [m for m in comp if is_core(m)]
        if core and len(comp) > 1 and comp[0] in on_server:
            bad += 1
            print(f"modcycles: the routing core is in a cycle of {len(comp)} modules with "
                  f"{SERVER!r} (`--all` lists them); how each core module reaches it:")
            for m in core:
                p = path_to(g, m, {SERVER})
                if p:
                    print("  " + " -> ".join(p))
    if bad:
        print("modcycles: the routing core must reach the server only through fabric::Fabric "
              "(docs/architecture.md)", file=sys.stderr)
        return 1
    print(f"modcycles: ok ({len(nodes)} modules; the routing core is not in a cycle with {SERVER})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
