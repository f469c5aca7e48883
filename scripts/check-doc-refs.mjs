#!/usr/bin/env node
// Every code reference in the docs resolves: `make doc-refs` (part of `make test`).
//
// Reads README.md, SECURITY.md, ARCHITECTURE.md, docs/**/*.md and crates/decider-cli/README.md
// and checks
//   (a) every relative Markdown link, and every repository path written as code (`src/proxy.rs`,
//       `tests/fixtures/faults.json`, `bench/run.sh`, `tests/e2e/*.test.mjs`, a bare source file
//       name such as `proxy.rs`), exists in the repository;
//   (b) every Rust path written as code (`module::Item`, `Type::method`, `decider_core::…`)
//       names something defined under src/ or crates/: a fn, struct, enum, enum variant,
//       const, static, mod, trait, type or file module of that name, inside the module or type
//       the path puts it in.
// Exits 1 listing each dangling reference as file:line.
//
//   node scripts/check-doc-refs.mjs [--skip FILE]... [--list]   check the docs (--skip: leave
//                                                    FILE out; --list: print every reference)
//   node scripts/check-doc-refs.mjs --self-test        check the checker on an in-memory example
//
// No dependencies: Node's standard library, and git to list the repository's files (a plain
// directory walk when git is not there).
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Files the docs name that are not in the repository on purpose: a user creates them. */
const NAMED_NOT_TRACKED = new Set(["model/challenger.json"]);

/** First segments of Rust paths that belong to other crates: not checked. */
const EXTERNAL_CRATES = new Set([
  "std", "core", "alloc", "serde", "serde_json", "serde_wasm_bindgen", "worker", "wasm_bindgen",
  "wasm_bindgen_futures", "js_sys", "web_sys", "clap", "anyhow", "thiserror", "libm", "proptest",
  "criterion", "flate2", "hdrhistogram", "futures", "libfuzzer_sys",
]);

/** Extensions of a bare file name (no directory) that is taken as a reference to a source file. */
const SOURCE_EXT = /\.(rs|mjs|js|cjs|sh|py|toml)$/;
/** Extensions of a path with a directory that make it a file reference. */
const FILE_EXT = /\.(rs|mjs|js|cjs|sh|py|toml|json|jsonl|md|svg|yml|yaml|lock|dict|txt|gz)$/;

// ---- the repository --------------------------------------------------------------------------

/**
 * The repository as the checker sees it: its file list (paths relative to the root, `/`
 * separators), the text of its Rust files, and which paths git ignores (build outputs).
 */
function diskRepo(root) {
  let files;
  const git = spawnSync("git", ["ls-files", "-co", "--exclude-standard"], { cwd: root, encoding: "utf8", maxBuffer: 64 << 20 });
  if (git.status === 0) {
    files = git.stdout.split("\n").filter(Boolean).filter((f) => existsSync(path.join(root, f)));
  } else {
    const skip = new Set([".git", "node_modules", "target", "build", ".tools", ".wrangler"]);
    files = [];
    const walk = (dir) => {
      for (const name of readdirSync(path.join(root, dir))) {
        const rel = dir ? `${dir}/${name}` : name;
        if (skip.has(rel) || rel === "fuzz/target") continue;
        if (statSync(path.join(root, rel)).isDirectory()) walk(rel);
        else files.push(rel);
      }
    };
    walk("");
  }
  const rust = new Map(files.filter(isRustSource).map((f) => [f, readFileSync(path.join(root, f), "utf8")]));
  const ignored = (p) => git.status === 0 && spawnSync("git", ["check-ignore", "-q", "--no-index", p], { cwd: root }).status === 0;
  return { files, rust, ignored };
}

const isRustSource = (f) => f.endsWith(".rs") && (f.startsWith("src/") || f.startsWith("crates/"));

// ---- the Rust index --------------------------------------------------------------------------

/** The crate a file belongs to and its module path within it, from its location. */
function modulePath(file) {
  let crate, rest;
  if (file.startsWith("src/")) {
    crate = "edge_decider";
    rest = file.slice(4);
  } else {
    const m = /^crates\/([^/]+)\/(src|tests|benches|examples)\/(.*)$/.exec(file);
    if (!m) return null;
    crate = m[1].replaceAll("-", "_");
    rest = m[2] === "src" ? m[3] : `${m[2]}/${m[3]}`;
  }
  const segs = rest.replace(/\.rs$/, "").split("/");
  const last = segs.at(-1);
  if (last === "lib" || last === "main" || last === "mod") segs.pop();
  return { crate, segs };
}

/** Definitions of one Rust file: name → kinds; the types it implements; enum variants. */
function definitions(text) {
  const defs = new Map();
  const add = (name, kind) => {
    if (!defs.has(name)) defs.set(name, new Set());
    defs.get(name).add(kind);
  };
  const impls = new Set();
  const lines = text.split("\n");
  const item = /^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|const|unsafe|extern(?:\s+"[^"]*")?)\s+)*(fn|struct|enum|trait|type|const|static|mod|union|macro_rules!)\s+(r#)?([A-Za-z_][A-Za-z0-9_]*)/;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const m = item.exec(line);
    if (m) {
      add(m[3], m[1]);
      if (m[1] === "enum") {
        // Variants: identifiers at depth 1 of the enum's braces.
        let depth = 0, started = false;
        for (let j = i; j < lines.length; j++) {
          const l = j === i ? lines[j].slice(lines[j].indexOf(m[3])) : lines[j];
          if (depth === 1 && started) {
            const v = /^\s*([A-Z][A-Za-z0-9_]*)\s*(?:[({,=]|$)/.exec(l);
            if (v) add(v[1], "variant");
          }
          for (const ch of l.replace(/\/\/.*$/, "")) {
            if (ch === "{" || ch === "(") {
              depth++;
              started = true;
            } else if (ch === "}" || ch === ")") depth--;
          }
          if (started && depth === 0) break;
        }
      }
    }
    const im = /^\s*(?:unsafe\s+)?impl\b(?:<[^>]*(?:<[^>]*>[^>]*)*>)?\s+(?:[^{]*?\bfor\s+)?&?(?:[A-Za-z_][A-Za-z0-9_]*::)*([A-Za-z_][A-Za-z0-9_]*)/.exec(line);
    if (im) impls.add(im[1]);
    // `pub use a::b::{C, D as E}`: the module re-exports these names.
    const use = /^\s*pub(?:\([^)]*\))?\s+use\s+([^;]+);/.exec(line);
    if (use) {
      for (const part of use[1].replace(/[{}]/g, ",").split(",")) {
        const name = part.trim().split(/\s+as\s+/).at(-1).split("::").at(-1).trim();
        if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) add(name, "use");
      }
    }
  }
  return { defs, impls };
}

/** An index of every Rust file under src/ and crates/: modules, definitions, impls. */
function rustIndex(rust) {
  const files = [];
  for (const [file, text] of rust) {
    const mp = modulePath(file);
    if (!mp) continue;
    files.push({ file, ...mp, ...definitions(text) });
  }
  const crates = new Set(files.map((f) => f.crate));
  return { files, crates };
}

const TYPE_KINDS = new Set(["struct", "enum", "trait", "type", "union"]);
const MEMBER_KINDS = new Set(["fn", "const", "static", "variant", "type"]);

/**
 * Why a Rust path does not resolve, or null when it does. Each segment must exist as a crate,
 * a module or a type; the last must be defined in the module or type before it.
 */
function resolveRust(index, ref) {
  let segs = ref.split("::");
  if (EXTERNAL_CRATES.has(segs[0])) return null;
  let files = index.files;
  if (index.crates.has(segs[0]) || segs[0] === "crate") {
    if (segs[0] !== "crate") files = files.filter((f) => f.crate === segs[0]);
    segs = segs.slice(1);
    if (segs.length === 0) return null;
  }
  // `scope` is the files the next segment must be found in.
  let scope = files;
  let owner = null; // { kind: "module" | "type", name }
  for (let i = 0; i < segs.length; i++) {
    const name = segs[i];
    const last = i === segs.length - 1;
    // As a module: a file module below the current scope, or an inline/declared `mod`.
    const asModule = scope.filter((f) => f.segs.includes(name) || f.defs.get(name)?.has("mod"));
    // As a type: defined (or re-exported) in scope.
    const typeFiles = files.filter((f) => [...(f.defs.get(name) ?? [])].some((k) => TYPE_KINDS.has(k)));
    const inScope = scope.some((f) => f.defs.has(name)) || asModule.length > 0;
    let found;
    if (owner?.kind === "type") {
      // A member of a type: defined in a file that defines or implements the type.
      const homes = files.filter((f) => f.impls.has(owner.name) || [...(f.defs.get(owner.name) ?? [])].some((k) => TYPE_KINDS.has(k)));
      found = homes.some((f) => [...(f.defs.get(name) ?? [])].some((k) => MEMBER_KINDS.has(k)));
      if (!found) return `\`${name}\` is not defined on \`${owner.name}\``;
    } else {
      found = inScope || (owner === null && (typeFiles.length > 0 || files.some((f) => f.defs.has(name))));
      if (!found) return owner ? `\`${name}\` is not defined in module \`${owner.name}\`` : `\`${name}\` is not defined`;
    }
    if (last) return null;
    if (typeFiles.length > 0 && !(asModule.length > 0 && /^[a-z]/.test(name))) {
      owner = { kind: "type", name };
    } else if (asModule.length > 0) {
      owner = { kind: "module", name };
      scope = asModule.filter((f) => f.segs.includes(name)).length > 0
        ? asModule.filter((f) => f.segs.includes(name))
        : asModule;
    } else {
      return `\`${name}\` is neither a module nor a type`;
    }
  }
  return null;
}

// ---- paths -----------------------------------------------------------------------------------

/** Glob (`*`, `**`, `<placeholder>`) → RegExp over repository paths. */
function globRegExp(p) {
  let re = "";
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === "*" && p[i + 1] === "*") {
      re += ".*";
      i++;
    } else if (c === "*") re += "[^/]*";
    else if (c === "<") {
      const end = p.indexOf(">", i);
      re += "[^/]+";
      i = end < 0 ? p.length : end;
    } else re += c.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

function pathExists(repo, p) {
  const clean = p.replace(/\/+$/, "").replace(/^\.\//, "");
  if (clean === "" || clean === ".") return true;
  if (/[*<]/.test(clean)) {
    const re = globRegExp(clean);
    return repo.files.some((f) => re.test(f) || f.split("/").some((_, i, a) => re.test(a.slice(0, i + 1).join("/"))));
  }
  return repo.files.some((f) => f === clean || f.startsWith(`${clean}/`));
}

// ---- the docs --------------------------------------------------------------------------------

/** Inline code spans and fenced code blocks of a Markdown text, with their line numbers. */
function codeOf(text) {
  const spans = [];
  const fenced = [];
  const links = [];
  let inFence = false;
  text.split("\n").forEach((line, i) => {
    const n = i + 1;
    if (/^\s*(```|~~~)/.test(line)) {
      inFence = !inFence;
      return;
    }
    if (inFence) {
      fenced.push({ line: n, text: line });
      return;
    }
    // Inline code: runs of backticks closed by the same run.
    const rest = line.replace(/(`+)([\s\S]*?)\1/g, (_, ticks, code) => {
      spans.push({ line: n, text: code.trim() });
      return " ".repeat(ticks.length * 2 + code.length);
    });
    for (const m of rest.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) links.push({ line: n, target: m[1] });
  });
  return { spans, fenced, links };
}

/** Tokens of code text that may be paths. */
const tokens = (code) => code.split(/[\s"'`(),;=|]+/).filter(Boolean);

/**
 * The repository path a code token names, or null when it names none. A path with a directory
 * counts when its first segment is a top-level entry of the repository, or of the doc's own
 * folder (`src/simulate.rs` in crates/decider-cli/README.md is that crate's).
 */
function pathRef(repo, token, { bare, bases }) {
  const t = token.replace(/[.:]+$/, "").replace(/^\.\//, "");
  if (!/^[A-Za-z0-9_.][A-Za-z0-9_.\-/<>*{}]*$/.test(t) || t.includes("://")) return null;
  if (t.includes("/")) {
    const first = t.split("/")[0];
    const top = bases.some((b) => repo.files.some((f) => f === b + first || f.startsWith(`${b}${first}/`)));
    // A directory with no extension is a path too (`crates/decider-cli`, `tests/e2e/`).
    return top ? t : null;
  }
  if (bare && (SOURCE_EXT.test(t) || t === "Makefile")) return t;
  return null;
}

/** With --list, every reference checked ("file:line: kind ref"). */
const LISTED = [];

/** Every dangling reference of one doc: [{line, what}]. */
function checkDoc(repo, index, docPath, text) {
  const out = [];
  const seen = (line, what) => LISTED.push(`${docPath}:${line}: ${what}`);
  const { spans, fenced, links } = codeOf(text);
  const dir = path.posix.dirname(docPath);
  const bases = dir === "." ? [""] : ["", `${dir}/`];
  const checkPath = (line, p, raw) => {
    seen(line, `path ${raw}`);
    if (NAMED_NOT_TRACKED.has(p.replace(/\/+$/, ""))) return;
    if (p.includes("/")) {
      const found = bases.some((b) => pathExists(repo, b + p) || repo.ignored(b + p.replace(/[*<].*$/, "")));
      if (!found) out.push({ line, what: `path \`${raw}\` does not exist` });
    } else if (!repo.files.some((f) => path.posix.basename(f) === p)) {
      out.push({ line, what: `file \`${raw}\` is not in the repository` });
    }
  };
  for (const { line, target } of links) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("#")) continue;
    const rel = decodeURIComponent(target.split("#")[0]);
    if (!rel) continue;
    seen(line, `link ${target}`);
    const p = path.posix.normalize(path.posix.join(dir, rel));
    if (!pathExists(repo, p)) out.push({ line, what: `link (${target}) does not exist` });
  }
  for (const { line, text: code } of spans) {
    const toks = tokens(code);
    for (const tok of toks) {
      const p = pathRef(repo, tok, { bare: toks.length === 1, bases });
      if (p) checkPath(line, p, tok);
    }
    for (const m of code.matchAll(/(?<![A-Za-z0-9_:])((?:[A-Za-z_][A-Za-z0-9_]*::)+[A-Za-z_][A-Za-z0-9_]*)/g)) {
      seen(line, `item ${m[1]}`);
      const why = resolveRust(index, m[1]);
      if (why) out.push({ line, what: `item \`${m[1]}\`: ${why}` });
    }
  }
  for (const { line, text: code } of fenced) {
    for (const tok of tokens(code)) {
      const p = pathRef(repo, tok, { bare: false, bases });
      if (p && FILE_EXT.test(p)) checkPath(line, p, tok);
    }
  }
  return out;
}

/** The docs to check, relative to the root. */
function docList(repo) {
  const fixed = ["README.md", "SECURITY.md", "ARCHITECTURE.md", "crates/decider-cli/README.md"];
  const docs = repo.files.filter((f) => f.startsWith("docs/") && f.endsWith(".md")).sort();
  return [...fixed.filter((f) => repo.files.includes(f)), ...docs];
}

/** Checks the docs; returns the problem lines ("file:line: what"). */
export function check(repo, readDoc, skip = new Set()) {
  const index = rustIndex(repo.rust);
  const problems = [];
  for (const doc of docList(repo)) {
    if (skip.has(doc)) continue;
    for (const { line, what } of checkDoc(repo, index, doc, readDoc(doc))) problems.push(`${doc}:${line}: ${what}`);
  }
  return problems;
}

// ---- self-test -------------------------------------------------------------------------------

function selfTest() {
  const rust = new Map([
    ["crates/decider-core/src/lib.rs", "pub mod state;\npub use state::{State, StateError};\n"],
    ["crates/decider-core/src/state.rs", [
      "pub struct State { pub hour: u8 }",
      "pub enum StateError {",
      "    OutOfRange { field: &'static str },",
      "    Missing,",
      "}",
      "impl State {",
      "    pub fn from_body(b: &[u8]) -> Result<State, StateError> { todo!() }",
      "}",
      "pub const MAX_BODY: usize = 16;",
    ].join("\n")],
    ["src/proxy.rs", "pub fn forward() {}\nfn bad_gateway_message() {}\n"],
  ]);
  const files = [
    ...rust.keys(), "README.md", "docs/guide.md", "tests/fixtures/faults.json", "bench/run.sh", "tests/e2e/api.test.mjs",
    "scripts/run-e2e.mjs", "model/decision-model.json", "crates/decider-cli/README.md", "crates/decider-cli/src/simulate.rs",
  ];
  const docs = new Map([
    ["README.md", [
      "# Example",
      "See [the guide](docs/guide.md) and [the missing page](docs/gone.md).",
      "Proxying is in `src/proxy.rs` (`proxy::forward`, `proxy::bad_gateway_message`); the table is",
      "`tests/fixtures/faults.json`, run by `tests/e2e/*.test.mjs` and `bench/run.sh`.",
      "States: `decider_core::State::from_body`, `StateError::OutOfRange`, `state::MAX_BODY`.",
      "Gone: `src/scanner.rs` and `Decision::to_json` and `State::to_json`; `api.test.mjs` stays,",
      "`faults.test.mjs` went. Not paths: `application/json`, `/v1/decide`, `--out model.json`.",
      "User files: `model/challenger.json`. Outside: `serde_json::Value`.",
      "```sh",
      "bash bench/run.sh && node scripts/missing.mjs --out model/decision.json",
      "```",
    ].join("\n")],
    ["docs/guide.md", "Back to [the README](../README.md#example); `crates/decider-core/src/state.rs`.\n"],
    ["crates/decider-cli/README.md", "The simulator is `src/simulate.rs`; the trainer `src/train.rs`.\n"],
  ]);
  const repo = { files, rust, ignored: () => false };
  const got = check(repo, (d) => docs.get(d));
  const want = [
    "README.md:2: link (docs/gone.md) does not exist",
    "README.md:6: path `src/scanner.rs` does not exist",
    "README.md:6: item `Decision::to_json`: `Decision` is not defined",
    "README.md:6: item `State::to_json`: `to_json` is not defined on `State`",
    "README.md:7: file `faults.test.mjs` is not in the repository",
    "README.md:10: path `scripts/missing.mjs` does not exist",
    "README.md:10: path `model/decision.json` does not exist",
    "crates/decider-cli/README.md:1: path `src/train.rs` does not exist",
  ];
  const missing = want.filter((w) => !got.includes(w));
  const extra = got.filter((g) => !want.includes(g));
  // --skip leaves a doc out.
  const skipped = check(repo, (d) => docs.get(d), new Set(["README.md"])).filter((l) => l.startsWith("README.md:"));
  if (missing.length || extra.length || skipped.length) {
    console.error("check-doc-refs self-test failed");
    for (const m of missing) console.error(`  not reported: ${m}`);
    for (const e of extra) console.error(`  reported wrongly: ${e}`);
    for (const s of skipped) console.error(`  reported in a skipped doc: ${s}`);
    process.exit(1);
  }
  console.log(`check-doc-refs self-test: ${want.length} dangling references found, none wrongly`);
}

// ---- main ------------------------------------------------------------------------------------

function main(argv) {
  const skip = new Set();
  let list = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--self-test") return selfTest();
    if (argv[i] === "--list") list = true;
    else if (argv[i] === "--skip" && argv[i + 1]) skip.add(path.relative(ROOT, path.resolve(argv[++i])).split(path.sep).join("/"));
    else {
      console.error(`usage: node scripts/check-doc-refs.mjs [--skip FILE]... [--list] | --self-test (got ${argv[i]})`);
      process.exit(2);
    }
  }
  const repo = diskRepo(ROOT);
  const problems = check(repo, (d) => readFileSync(path.join(ROOT, d), "utf8"), skip);
  const docs = docList(repo).filter((d) => !skip.has(d));
  if (list) for (const l of LISTED) console.log(l);
  if (problems.length) {
    for (const p of problems) console.error(p);
    console.error(`doc-refs: ${problems.length} dangling reference(s) in ${docs.length} docs`);
    process.exit(1);
  }
  console.log(`doc-refs: every code reference in ${docs.length} docs resolves${skip.size ? ` (skipped: ${[...skip].join(", ")})` : ""}`);
}

main(process.argv.slice(2));
