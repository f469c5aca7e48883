#!/usr/bin/env python3
"""No import circle among the modules of a Rust crate, and the planes kept apart.

Builds the module import graph of each crate and fails (exit 1) when one crate has a cycle,
naming each as `a -> b -> a` with the line that makes every edge. Then checks the layers
(`PLANES`): which crate may depend on which, and which may do I/O. What it checks, by name:

- `data plane without control plane`: the serving Worker (the root crate, `src/`) neither
  depends on `decider-rollout` nor names `decider_rollout` in its code: nothing of the judge,
  its state or its rules is in the wasm every routing isolate loads.
- `pure libraries`: decider-core and decider-rollout depend on no `worker`, `web-sys`,
  `js-sys` or `wasm-bindgen`, and their code names none of them: no I/O.
- `control plane apart`: the control plane Worker (`workers/rollout`) does not depend on the
  serving Worker's crate, nor the serving Worker on it.

    python3 scripts/check-structure.py              # the crates of this repository
    python3 scripts/check-structure.py DIR...       # the crates whose src/ folders these are
    python3 scripts/check-structure.py --self-test  # the checker on a fixture with known cycles

The graph:
- A module is a file: `lib.rs` is `crate`, `main.rs` is `main` (a crate of its own, the bin),
  `a.rs` or `a/mod.rs` is `a`, `a/b.rs` is `a::b`. Inline modules belong to their file.
- The modules are those reachable through `mod x;` declarations from `lib.rs` and `main.rs`.
  Every item under `#[cfg(test)]` is left out (an inline `mod tests { ... }`, a test helper's
  `mod testing;`), and so is any module named `tests`.
- An edge a -> b for each path from a into b: `use crate::…`, `use super::…`, `use self::…`,
  `use child::…` (a module a declares), the same paths in code (`crate::x::f()`, or through a
  name `use` brought in), and, from the bin, `<lib crate>::…` (`decider_cli::report::Report`).
  A path names the module file that defines its item: the deepest module file it reaches
  (`crate::report::join::SuccessRule` is `report::join`), and through a `pub use` re-export to
  the module re-exported from (`crate::logs::LogReader` is `logs::frame`).
- A `pub use` is a module's interface, not a use of its own: it is an edge only when the
  module's code uses the name too. A `mod x;` declaration is no edge, and neither is a path
  in a comment, a doc link or a string.

Standard library only.
"""

import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DIRS = [
    "src",
    "crates/decider-core/src",
    "crates/decider-rollout/src",
    "crates/decider-cli/src",
    "workers/rollout/src",
]

# (name, crate folder, crates its Cargo.toml must not depend on, paths its code must not name)
IO_CRATES = ["worker", "web-sys", "js-sys", "wasm-bindgen"]
PLANES = [
    ("data plane without control plane", ".", ["decider-rollout", "edge-decider-rollout"], ["decider_rollout"]),
    ("pure libraries", "crates/decider-core", IO_CRATES + ["decider-rollout"], ["worker", "web_sys", "js_sys", "wasm_bindgen", "decider_rollout"]),
    ("pure libraries", "crates/decider-rollout", IO_CRATES, ["worker", "web_sys", "js_sys", "wasm_bindgen"]),
    ("control plane apart", "workers/rollout", ["edge-decider"], ["edge_decider"]),
]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# At most this many cycles are named per strongly connected group (their number grows fast).
MAX_CYCLES = 40


def blank(text, start, end):
    """`text` with [start, end) replaced by spaces, newlines kept (line numbers stay right)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def strip_comments_and_literals(src):
    """Comments, strings and char literals blanked out, keeping every offset."""
    out = list(src)
    i, n = 0, len(src)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not re.match(r"\w", src[i - 1])):
            close = '"' + m.group(1)
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
            wipe(i, j)
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i) and (i == 0 or not re.match(r"\w", src[i - 1]))):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', b'x'), not a lifetime ('a, 'static).
            m = re.compile(r"'(\\(u\{[0-9A-Fa-f]+\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'").match(src, i)
            if m:
                wipe(i, m.end())
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def matching(text, open_at):
    """Offset just past the bracket that closes the one at `open_at`."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    stack = []
    for j in range(open_at, len(text)):
        ch = text[j]
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
    return len(text)


CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(")
ATTR = re.compile(r"\s*#\s*!?\s*\[")


def drop_test_items(text):
    """`text` with every item under a `#[cfg(...test...)]` (not `not(test)`) blanked out: an
    inline `mod tests { ... }`, a `mod testing;` declaration (so its file is not read)."""
    pos = 0
    while m := CFG_TEST.search(text, pos):
        attr_end = matching(text, m.end() - 1)
        attr_end = text.find("]", attr_end) + 1
        cond = text[m.end() - 1 : attr_end]
        if not re.search(r"\btest\b", cond) or re.search(r"\bnot\b", cond):
            pos = attr_end
            continue
        j = attr_end
        while a := ATTR.match(text, j):
            j = matching(text, a.end() - 1)
        # The item runs to its first `;` or to the end of its first `{ ... }` block.
        k = j
        while k < len(text) and text[k] not in ";{":
            k = matching(text, k) if text[k] in "([" else k + 1
        end = k + 1 if k >= len(text) or text[k] == ";" else matching(text, k)
        text = blank(text, m.start(), end)
        pos = end
    return text


def expand_use_tree(tree):
    """`a::{b, c::{d as e, self}, f::*}` -> [("a::b", "b"), ("a::c::d", "e"), ("a::c", "c"),
    ("a::f", "*")]: each path with the name it brings into scope."""
    tree = re.sub(r"\s+", " ", tree).strip()
    out = []

    def walk(prefix, t):
        depth, parts, cur = 0, [], ""
        for ch in t:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        for p in (p.strip() for p in parts):
            if not p:
                continue
            if "{" in p:
                head, rest = p.split("{", 1)
                walk(prefix + head.replace(" ", ""), rest[: rest.rfind("}")])
                continue
            alias = re.search(r"\s+as\s+(" + IDENT + r")$", p)
            path = prefix + re.sub(r"\s+as\s+" + IDENT + "$", "", p).replace(" ", "")
            if path.endswith("::*"):
                out.append((path[:-3], "*"))
                continue
            if path.endswith("::self"):
                path = path[:-6]
            out.append((path, alias.group(1) if alias else path.split("::")[-1]))

    walk("", tree)
    return out


USE = re.compile(r"(\bpub\s*(?:\([^)]*\))?\s*)?\buse\s+([^;]+);")
CODE_PATH = re.compile(r"(?<![\w:$])(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)")


class Module:
    def __init__(self, name, path, segs, crate_root):
        self.name = name  # e.g. "loadtest::knee", "crate", "main"
        self.path = path  # file
        self.segs = segs  # module path below its crate root
        self.crate_root = crate_root  # "crate" (lib) or the bin's name
        self.children = set()
        self.text = ""  # comments, literals and test items blanked out
        self.code = ""  # and the `use` statements too
        self.inline = []  # (start, end, name) of inline modules
        self.uses = []  # (offset, path, name, is_pub)
        self.imports = {}  # name in scope -> (offset, path), from `use`
        self.reexports = {}  # name -> (offset, path), from `pub use`

    def prepare(self, text):
        self.text = text
        code = text
        for u in USE.finditer(text):
            for path, name in expand_use_tree(u.group(2)):
                is_pub = bool(u.group(1))
                self.uses.append((u.start(), path, name, is_pub))
                if name != "*":
                    self.imports[name] = (u.start(), path)
                    if is_pub:
                        self.reexports[name] = (u.start(), path)
            code = blank(code, u.start(), u.end())
        # Visibility paths (`pub(in crate::x)`) and `mod x;` declarations are no use of anything.
        for pattern in (r"pub\s*\(\s*in\s+[^)]*\)", r"\bmod\s+" + IDENT + r"\s*;"):
            code = re.sub(pattern, lambda x: " " * len(x.group(0)), code)
        self.code = code


class Crate:
    """The modules of one crate's src/ folder: the lib and the bins beside it."""

    def __init__(self, src):
        self.src = src
        self.lib_name = crate_name(src)
        self.modules = {}  # (crate_root, segs tuple) -> Module
        self.problems = []
        roots = []
        if os.path.exists(os.path.join(src, "lib.rs")):
            roots.append(("crate", os.path.join(src, "lib.rs")))
        if os.path.exists(os.path.join(src, "main.rs")):
            roots.append(("main", os.path.join(src, "main.rs")))
        bindir = os.path.join(src, "bin")
        if os.path.isdir(bindir):
            for f in sorted(os.listdir(bindir)):
                if f.endswith(".rs"):
                    roots.append((f[:-3], os.path.join(bindir, f)))
        for root, path in roots:
            self.load(root, path, (), True)

    def load(self, root, path, segs, is_dir_owner):
        name = "::".join(segs) if segs else root
        if root != "crate" and segs:
            name = root + "::" + name
        m = Module(name, path, segs, root)
        self.modules[(root, segs)] = m
        with open(path, encoding="utf-8") as f:
            raw = f.read()
        text = drop_test_items(strip_comments_and_literals(raw))
        m.prepare(text)
        for im in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", text):
            m.inline.append((im.end() - 1, matching(text, im.end() - 1), im.group(1)))
        base = os.path.dirname(path) if is_dir_owner else os.path.splitext(path)[0]
        for d in re.finditer(r"\bmod\s+(" + IDENT + r")\s*;", text):
            child = d.group(1)
            if child == "tests":
                continue
            if self.inline_scope(m, d.start()):
                self.problems.append(f"{path}: `mod {child};` inside an inline module is not followed")
                continue
            m.children.add(child)
            for cand, owner in ((os.path.join(base, child + ".rs"), False), (os.path.join(base, child, "mod.rs"), True)):
                if os.path.exists(cand):
                    self.load(root, cand, segs + (child,), owner)
                    break
            else:
                self.problems.append(f"{path}: no file for `mod {child};`")

    @staticmethod
    def inline_scope(m, pos):
        """The inline modules around offset `pos`, outermost first."""
        return [name for (s, e, name) in sorted(m.inline) if s < pos < e]

    def resolve(self, m, pos, path, depth=0):
        """The module file that defines what a path written at `pos` in `m` names, or None
        (outside the crate). A name a module re-exports (`pub use`) is followed to its source."""
        segs = path.split("::")
        if not segs[0] or depth > 16:
            return None  # ::external, or a re-export loop
        here = list(m.segs) + self.inline_scope(m, pos)
        root = m.crate_root
        first = segs[0]
        if first == "crate":
            target, rest = [], segs[1:]
        elif first in ("super", "self"):
            target, rest = here, segs
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    if not target:
                        return None
                    target = target[:-1]
                rest = rest[1:]
        elif root != "crate" and first == self.lib_name and ("crate", ()) in self.modules:
            root, target, rest = "crate", [], segs[1:]
        elif self.declares(root, here, first):
            target, rest = here, segs
        elif first in m.imports and m.imports[first][1] != path:
            # A name brought in by `use` (`use crate::ope; ... ope::evaluate(..)`).
            at, imported = m.imports[first]
            return self.resolve(m, at, "::".join([imported] + segs[1:]), depth + 1)
        else:
            return None
        full = target + rest
        for k in range(len(full), -1, -1):
            mod = self.modules.get((root, tuple(full[:k])))
            if mod:
                rest = full[k:]
                if rest and rest[0] in mod.reexports:
                    at, source = mod.reexports[rest[0]]
                    found = self.resolve(mod, at, "::".join([source] + rest[1:]), depth + 1)
                    return found or mod
                return mod
        return None

    def declares(self, root, here, name):
        """Whether module `here` (a file module or an inline one in it) has a child `name`."""
        for k in range(len(here), -1, -1):
            mod = self.modules.get((root, tuple(here[:k])))
            if mod:
                inner = here[k:]
                return name in (mod.children if not inner else ()) or any(
                    n == name and self.inline_scope(mod, s) == inner for (s, e, n) in mod.inline
                )
        return False

    def edges(self):
        """{(from, to): (file, line, path)} over every module of the crate."""
        found = {}
        for m in self.modules.values():
            for pos, path, name, is_pub in m.uses:
                # A re-export alone is the module's interface, not a use: it is an edge only
                # when the module's own code uses the name too.
                if is_pub and (name == "*" or not re.search(r"(?<![\w:])" + re.escape(name) + r"\b", m.code)):
                    continue
                self.add(found, m, pos, path)
            for p in CODE_PATH.finditer(m.code):
                self.add(found, m, p.start(), re.sub(r"\s+", "", p.group(1)))
        return found

    def add(self, found, m, pos, path):
        to = self.resolve(m, pos, path)
        if to is None or to is m:
            return
        key = (m.name, to.name)
        if key not in found:
            line = m.text.count("\n", 0, pos) + 1
            found[key] = (os.path.relpath(m.path, self.src), line, path)


def crate_name(src):
    """The name the crate's bins use for its lib (`decider_cli`), from the Cargo.toml beside
    `src`: `[lib] name`, else `[package] name`, with `-` as `_`."""
    names, section = {}, None
    try:
        with open(os.path.join(os.path.dirname(src), "Cargo.toml"), encoding="utf-8") as f:
            for line in f:
                if h := re.match(r"\s*\[([^\[\]]+)\]\s*(#.*)?$", line):
                    section = h.group(1).strip()
                elif (v := re.match(r'\s*name\s*=\s*"([^"]+)"', line)) and section in ("package", "lib"):
                    names.setdefault(section, v.group(1))
    except OSError:
        return None
    name = names.get("lib") or names.get("package")
    return name.replace("-", "_") if name else None


def strongly_connected(nodes, adj):
    """Tarjan's strongly connected components, each a sorted list."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(adj.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycles_in(comp, adj, limit=MAX_CYCLES):
    """Elementary cycles inside one component, each starting at its smallest module."""
    members = set(comp)
    found = []
    for start in comp:
        # Only cycles whose smallest module is `start`: each cycle is found once.
        allowed = {v for v in members if v >= start}
        path = [start]

        def dfs(v):
            for w in sorted(adj.get(v, ())):
                if len(found) >= limit:
                    return
                if w == start:
                    found.append(path + [start])
                elif w in allowed and w not in path:
                    path.append(w)
                    dfs(w)
                    path.pop()

        dfs(start)
        if len(found) >= limit:
            break
    found.sort(key=lambda c: (len(c), c))
    return found


def check(src, label, out):
    """Appends the verdict on one src/ folder to `out`; returns the cycles found."""
    crate = Crate(src)
    edges = crate.edges()
    adj = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
    names = sorted(m.name for m in crate.modules.values())
    cycles = []
    elided = []
    for comp in strongly_connected(names, adj):
        if len(comp) > 1:
            found = cycles_in(comp, adj)
            cycles.extend(found)
            if len(found) >= MAX_CYCLES:
                elided.append(comp)
    for p in crate.problems:
        out.append(f"{label}: warning: {p}")
    head = f"{label}: {len(names)} modules, {len(edges)} edges"
    if not cycles:
        out.append(f"{head}, no cycle")
        return cycles
    out.append(f"{head}, {len(cycles)} cycle(s):")
    for c in cycles:
        out.append("  " + " -> ".join(c))
        for a, b in zip(c, c[1:]):
            f, line, path = edges[(a, b)]
            out.append(f"      {a} -> {b}: {f}:{line} ({path})")
    for comp in elided:
        out.append(f"  (only the first {MAX_CYCLES} cycles among {', '.join(comp)})")
    return cycles


FIXTURE = {
    "Cargo.toml": '[package]\nname = "fix-ture"\n',
    # lib.rs declares everything; `testing` only under cfg(test).
    "src/lib.rs": """//! Uses nothing: `crate::a` in a comment is no edge.
pub mod a;
pub mod b;
pub mod c;
pub mod clean;
#[cfg(test)]
mod testing;
const S: &str = "crate::b::X";
""",
    # a -> b (a use tree with self and an alias), a -> c::d (a path in code).
    "src/a.rs": """use crate::b::{self, Y as Z};
pub struct X;
pub fn f() { crate::c::d::g(); }
#[cfg(test)]
#[allow(unused)]
mod tests { use crate::clean::Q; fn t() { let _ = '{'; } }
""",
    # b -> a: the cycle a -> b -> a. A `tests` module is left out even without cfg(test).
    "src/b.rs": """pub struct Y;
pub fn h() -> super::a::X { super::a::X }
mod tests;
""",
    "src/b/tests.rs": "use crate::clean::Q;\n",
    # c only re-exports d: no edge c -> c::d.
    "src/c/mod.rs": """pub mod d;
pub use d::g;
pub use d::*;
""",
    # d -> a (super::super) closes a -> c::d -> a; the rest stays inside d.
    "src/c/d.rs": """pub fn g() { let _ = r#"crate::b"#; super::super::a::f(); }
pub(in crate::c) fn p() {}
mod inner { use super::g; use self::deeper::k; mod deeper { pub fn k() {} } }
#[cfg(test)]
mod tests;
""",
    "src/c/d/tests.rs": "use crate::b::Y;\n",
    # clean -> c (the use), and -> c::d through c's re-export of g.
    "src/clean.rs": "use crate::c;\npub struct Q;\npub fn q() { c::g(); }\n",
    # A test helper is left out.
    "src/testing.rs": "use crate::clean::Q;\nuse crate::a::X;\n",
    # The bin reaches the lib through the lib's crate name.
    "src/main.rs": "use fix_ture::a;\nfn main() { fix_ture::clean::q(); a::f(); }\n",
}


def dependencies(cargo_toml):
    """The crate names a Cargo.toml depends on ([dependencies], [build-dependencies] and
    target-specific tables; not [dev-dependencies])."""
    deps, table = set(), None
    with open(cargo_toml, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("["):
                name = line.strip("[] ")
                # A crate's own tables; the workspace's table only declares versions.
                own = re.fullmatch(r"((target\.[^ ]+)\.)?(build-)?dependencies", name)
                table = name if own else None
                continue
            m = re.match(r"([A-Za-z0-9_-]+)\s*=", line)
            if table and m:
                deps.add(m.group(1))
    return deps


def check_planes(root, planes, out):
    """Each plane's rule: the dependencies its Cargo.toml must not have and the paths its
    code must not name. Answers the broken rules' names."""
    broken = []
    for name, folder, no_deps, no_paths in planes:
        crate = os.path.join(root, folder)
        bad = sorted(dependencies(os.path.join(crate, "Cargo.toml")) & set(no_deps))
        for d in bad:
            out.append(f"{name}: {folder}/Cargo.toml depends on {d}")
        src = os.path.join(crate, "src")
        for dirpath, _, files in os.walk(src):
            for fn in sorted(files):
                if not fn.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, fn)
                with open(path, encoding="utf-8") as f:
                    code = drop_test_items(strip_comments_and_literals(f.read()))
                for p in no_paths:
                    for m in re.finditer(r"(?<![A-Za-z0-9_:])" + p + r"::", code):
                        line = code.count("\n", 0, m.start()) + 1
                        rel = os.path.relpath(path, root)
                        out.append(f"{name}: {rel}:{line} names {p}")
                        bad.append(p)
        if bad:
            broken.append(name)
    return broken


def self_test():
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    expect(
        "use tree",
        expand_use_tree("crate::{b::{self, Y as Z}, c::d::*, e}"),
        [("crate::b", "b"), ("crate::b::Y", "Z"), ("crate::c::d", "*"), ("crate::e", "e")],
    )
    expect("strings", strip_comments_and_literals('a "x::y" \'c\' \'a b // z\n/* q */'), "a        " + "    " + "'a b     \n       ")
    with tempfile.TemporaryDirectory() as d:
        for rel, text in FIXTURE.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        crate = Crate(os.path.join(d, "src"))
        expect("modules", sorted(m.name for m in crate.modules.values()), ["a", "b", "c", "c::d", "clean", "crate", "main"])
        expect("problems", crate.problems, [])
        expect(
            "edges",
            sorted(crate.edges()),
            [
                ("a", "b"),
                ("a", "c::d"),
                ("b", "a"),
                ("c::d", "a"),
                ("clean", "c"),
                ("clean", "c::d"),
                ("main", "a"),
                ("main", "clean"),
            ],
        )
        out = []
        cycles = check(os.path.join(d, "src"), "fixture", out)
        expect("cycles", cycles, [["a", "b", "a"], ["a", "c::d", "a"]])
        expect("report line", out[1] if len(out) > 1 else "", "  a -> b -> a")
        # Without b's use of a and d's, the fixture has no cycle.
        with open(os.path.join(d, "src/b.rs"), "w", encoding="utf-8") as f:
            f.write("pub struct Y;\n")
        with open(os.path.join(d, "src/c/d.rs"), "w", encoding="utf-8") as f:
            f.write("pub fn g() {}\n")
        expect("fixed", check(os.path.join(d, "src"), "fixture", []), [])
    with tempfile.TemporaryDirectory() as d:
        for rel, text in {
            "a/Cargo.toml": "[dependencies]\nfoo = \"1\"\n[dev-dependencies]\nbar = \"1\"\n",
            "a/src/lib.rs": "use baz::x; // bar::y\nfn f() { qux::z(); }\n",
        }.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        out = []
        expect("planes clean", check_planes(d, [("rule", "a", ["bar"], ["bar"])], out), [])
        out = []
        broken = check_planes(d, [("rule", "a", ["foo"], ["baz", "qux"])], out)
        expect("planes broken", (broken, out), (["rule"], [
            "rule: a/Cargo.toml depends on foo",
            "rule: a/src/lib.rs:1 names baz",
            "rule: a/src/lib.rs:2 names qux",
        ]))
    for f in failures:
        print(f"self-test: {f}")
    print("self-test: " + ("FAILED" if failures else "ok"))
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    dirs = argv[1:] or [os.path.join(ROOT, d) for d in DEFAULT_DIRS]
    out, bad = [], 0
    for src in dirs:
        if not os.path.isdir(src):
            print(f"{src}: not a folder", file=sys.stderr)
            return 2
        label = os.path.relpath(os.path.abspath(src), ROOT) if os.path.abspath(src).startswith(ROOT) else src
        bad += bool(check(src, label, out))
    if not argv[1:]:
        broken = check_planes(ROOT, PLANES, out)
        bad += len(broken)
        names = sorted({p[0] for p in PLANES})
        out.append("planes: " + ("; ".join(f"{n}: " + ("BROKEN" if n in broken else "ok") for n in names)))
    print("\n".join(out))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
