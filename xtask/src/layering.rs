//! Layering checks: which workspace crate may depend on what (ARCHITECTURE.md's invariants that
//! a machine can prove). Direct dependencies come from `cargo metadata`; "no tokio, even
//! transitively" comes from `cargo tree -p <crate> -e normal`, which resolves features the way
//! building that crate alone does.
//!
//! Inside each crate, no two modules may import each other: a crate should read top-down, and a
//! pair that needs each other is one module in two files, or wants what both need moved below
//! them. The imports are read from the source text (`crate::`, `super::`, `self::` and child
//! module paths, braces expanded), so it needs no compiler; see `module_cycles`.
//!
//! To add a rule: add a line to `DIRECT_RULES` or `NO_TRANSITIVE`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::util::{Ctx, output};

/// The kind of a dependency edge, as `cargo metadata` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    Normal,
    Dev,
    Build,
}

impl DepKind {
    fn describe(self) -> &'static str {
        match self {
            DepKind::Normal => "normal dependency",
            DepKind::Dev => "dev-dependency",
            DepKind::Build => "build-dependency",
        }
    }
}

#[derive(Debug)]
pub struct Dep {
    /// The package name (not the `package = ...` rename).
    pub name: String,
    pub kind: DepKind,
}

#[derive(Debug)]
pub struct Member {
    pub name: String,
    /// Directory of the member's manifest, relative to the workspace root (e.g. `crates/llooma-net`).
    pub dir: PathBuf,
    pub deps: Vec<Dep>,
    /// Names of `bench` targets.
    pub benches: Vec<String>,
}

#[derive(Debug)]
pub struct Workspace {
    pub members: Vec<Member>,
    pub target_dir: PathBuf,
}

impl Workspace {
    /// `cargo metadata --format-version 1 --no-deps`: the workspace members and their declared
    /// dependencies (no resolution needed, so it is fast and works before a lockfile exists).
    pub fn load(ctx: &Ctx) -> Result<Self> {
        let json = output(&mut ctx.cargo(["metadata", "--format-version", "1", "--no-deps"]))?;
        let meta: Value =
            serde_json::from_str(&json).context("`cargo metadata` printed invalid JSON")?;
        let root = PathBuf::from(str_field(&meta, "workspace_root")?);
        let target_dir = PathBuf::from(str_field(&meta, "target_directory")?);
        let members_ids: Vec<&str> =
            array_field(&meta, "workspace_members")?.iter().filter_map(Value::as_str).collect();
        let mut members = Vec::new();
        for pkg in array_field(&meta, "packages")? {
            let id = str_field(pkg, "id")?;
            if !members_ids.contains(&id) {
                continue;
            }
            let manifest = PathBuf::from(str_field(pkg, "manifest_path")?);
            let dir = manifest
                .parent()
                .and_then(|d| d.strip_prefix(&root).ok())
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let mut deps = Vec::new();
            for dep in array_field(pkg, "dependencies")? {
                let kind = match dep.get("kind").and_then(Value::as_str) {
                    None => DepKind::Normal,
                    Some("dev") => DepKind::Dev,
                    Some("build") => DepKind::Build,
                    Some(other) => bail!("unknown dependency kind `{other}` in cargo metadata"),
                };
                deps.push(Dep { name: str_field(dep, "name")?.to_owned(), kind });
            }
            let mut benches = Vec::new();
            for target in array_field(pkg, "targets")? {
                let is_bench = target
                    .get("kind")
                    .and_then(Value::as_array)
                    .is_some_and(|kinds| kinds.iter().any(|k| k.as_str() == Some("bench")));
                if is_bench {
                    benches.push(str_field(target, "name")?.to_owned());
                }
            }
            members.push(Member { name: str_field(pkg, "name")?.to_owned(), dir, deps, benches });
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Self { members, target_dir })
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("cargo metadata: missing string field `{key}`"))
}

fn array_field<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    v.get(key)
        .and_then(Value::as_array)
        .with_context(|| format!("cargo metadata: missing array field `{key}`"))
}

/// Which workspace members a rule applies to.
#[derive(Debug, Clone, Copy)]
enum Scope {
    /// Every member except the named ones.
    AllExcept(&'static [&'static str]),
    /// Members whose directory is under one of these workspace-relative folders.
    Under(&'static [&'static str]),
}

impl Scope {
    fn covers(self, m: &Member) -> bool {
        match self {
            Scope::AllExcept(names) => !names.contains(&m.name.as_str()),
            Scope::Under(dirs) => dirs.iter().any(|d| m.dir.starts_with(d)),
        }
    }
}

/// "Crates in `scope` must not directly depend on any of `forbidden` (edges of `kinds`)."
#[derive(Debug)]
struct DirectRule {
    scope: Scope,
    forbidden: &'static [&'static str],
    kinds: &'static [DepKind],
    why: &'static str,
}

const NON_DEV: &[DepKind] = &[DepKind::Normal, DepKind::Build];

const DIRECT_RULES: &[DirectRule] = &[
    DirectRule {
        scope: Scope::AllExcept(&["llooma-store", "llooma-migration", "xtask"]),
        forbidden: &["sea-orm", "sea-orm-migration", "sea-query", "sqlx"],
        kinds: NON_DEV,
        why: "only llooma-store and llooma-migration may name sea-orm (or the SQL layers under it); \
              other crates use the ports llooma-core defines and llooma-store implements (tests \
              may open the database directly to look at or tamper with what is stored)",
    },
    DirectRule {
        scope: Scope::AllExcept(&["llooma-e2e", "xtask"]),
        forbidden: &["reqwest"],
        kinds: NON_DEV,
        why: "llooma-net is the one outbound HTTP client (it enforces the outbound policy), on \
              hyper's connections; a second HTTP library would be a second client. Tests may use \
              reqwest as a dev-dependency",
    },
    DirectRule {
        scope: Scope::Under(&["crates/llooma-web"]),
        forbidden: &[
            "llooma-api",
            "llooma-store",
            "llooma-core",
            "llooma-vault",
            "llooma-mcp-client",
            "llooma-net",
        ],
        kinds: NON_DEV,
        why: "the web interface reads and changes everything through the JSON API (in-process \
              on the server, over HTTP in the browser), which it is handed as a router; it \
              shares only llooma-types with the server",
    },
    DirectRule {
        scope: Scope::Under(&["crates/llooma-store"]),
        forbidden: &["llooma-chatto-bot", "llooma-core", "llooma-api"],
        kinds: NON_DEV,
        why: "the store keeps records and implements the ports of the crates below it; it knows \
              nothing of chat servers or of the application above it (the bot ledger is \
              implemented in llooma-core on the store's plain methods)",
    },
    DirectRule {
        scope: Scope::AllExcept(&["llooma-core", "llooma-chatto-fake", "llooma-e2e", "xtask"]),
        forbidden: &["llooma-chatto-bot"],
        kinds: NON_DEV,
        why: "nothing Chatto-specific exists outside llooma-chatto-bot, which sits under the \
              core (the core implements its Responder and runtime port)",
    },
    DirectRule {
        scope: Scope::Under(&["crates", "migrations"]),
        forbidden: &["anyhow", "eyre", "color-eyre"],
        kinds: NON_DEV,
        why: "library crates return typed errors (a thiserror enum); anyhow/eyre only in apps/ \
              and xtask/",
    },
];

/// "Of the workspace's crates, `krate` depends only on `allowed` (edges of `kinds`)."
#[derive(Debug)]
struct OnlyRule {
    krate: &'static str,
    allowed: &'static [&'static str],
    kinds: &'static [DepKind],
    why: &'static str,
}

const ONLY_RULES: &[OnlyRule] = &[OnlyRule {
    krate: "llooma-api",
    allowed: &["llooma-core", "llooma-types", "llooma-vault"],
    kinds: NON_DEV,
    why: "the API is HTTP only: routes, extractors, request and response shapes, event-stream \
          framing and the mapping of llooma-core's errors to status codes; what a request does \
          is llooma-core's (llooma-vault only for the write-only `Secret` of request bodies)",
}];

/// "This crate must not depend on `forbidden`, not even transitively, through normal edges."
#[derive(Debug)]
struct TransitiveRule {
    krate: &'static str,
    forbidden: &'static str,
    why: &'static str,
}

const PURE_WHY: &str = "pure crates do no IO and must not depend on tokio";

const NO_TRANSITIVE: &[TransitiveRule] = &[
    TransitiveRule { krate: "llooma-policy", forbidden: "tokio", why: PURE_WHY },
    TransitiveRule { krate: "llooma-consent", forbidden: "tokio", why: PURE_WHY },
    TransitiveRule { krate: "llooma-tool-naming", forbidden: "tokio", why: PURE_WHY },
    TransitiveRule { krate: "llooma-memory-guard", forbidden: "tokio", why: PURE_WHY },
    TransitiveRule { krate: "llooma-types", forbidden: "tokio", why: PURE_WHY },
    TransitiveRule { krate: "llooma-media", forbidden: "tokio", why: PURE_WHY },
    TransitiveRule {
        krate: "llooma-server",
        forbidden: "reqwest",
        why: "the product has one outbound HTTP client, llooma-net; a library that brings its own \
              (rmcp's reqwest transport) is given llooma-net's through its transport trait",
    },
];

/// Where ARCHITECTURE.md holds the crate graph this module writes and checks.
const GRAPH_BEGIN: &str = "<!-- crate-graph: begin (written by `cargo xtask layering --write`; \
                           `cargo xtask ci` fails when it is out of date) -->";
const GRAPH_END: &str = "<!-- crate-graph: end -->";

/// The workspace's own crates, each with the workspace crates it depends on (normal and build
/// edges), highest layer first: a crate comes before everything it depends on.
fn crate_graph(ws: &Workspace) -> String {
    let ours = |name: &str| ws.members.iter().any(|m| m.name == name);
    let deps_of = |m: &Member| -> Vec<String> {
        let mut deps: Vec<String> = m
            .deps
            .iter()
            .filter(|d| d.kind != DepKind::Dev && ours(&d.name))
            .map(|d| d.name.clone())
            .collect();
        deps.sort();
        deps.dedup();
        deps
    };
    // A crate's layer: 0 without dependencies of ours, else one more than its highest one.
    let mut layer: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    while layer.len() < ws.members.len() {
        let before = layer.len();
        for m in &ws.members {
            if layer.contains_key(&m.name) {
                continue;
            }
            let deps = deps_of(m);
            if deps.iter().all(|d| layer.contains_key(d)) {
                let level = deps.iter().filter_map(|d| layer.get(d)).max().map_or(0, |l| l + 1);
                layer.insert(m.name.clone(), level);
            }
        }
        if layer.len() == before {
            break; // a cycle: cargo refuses those, so this cannot happen
        }
    }
    let mut members: Vec<&Member> = ws.members.iter().collect();
    members.sort_by(|a, b| {
        let (la, lb) = (layer.get(&a.name), layer.get(&b.name));
        lb.cmp(&la).then_with(|| a.name.cmp(&b.name))
    });
    let width = members.iter().map(|m| m.name.len()).max().unwrap_or(0);
    let mut out = String::from("```text\n");
    for m in members {
        let deps = deps_of(m);
        let deps = if deps.is_empty() { "(none of ours)".to_owned() } else { deps.join(", ") };
        out.push_str(&format!("{:<width$} -> {deps}\n", m.name));
    }
    out.push_str("```\n");
    out
}

/// Writes the crate graph into ARCHITECTURE.md (`cargo xtask layering --write`).
pub fn write_graph(ctx: &Ctx) -> Result<()> {
    let ws = Workspace::load(ctx)?;
    let path = ctx.root.join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).context("reading ARCHITECTURE.md")?;
    let (before, _, after) = graph_block(&text)?;
    let updated = format!("{before}{GRAPH_BEGIN}\n{}{GRAPH_END}{after}", crate_graph(&ws));
    std::fs::write(&path, updated).context("writing ARCHITECTURE.md")?;
    eprintln!("layering: wrote the crate graph into ARCHITECTURE.md");
    Ok(())
}

/// (text before the block, the block's content, text after it).
fn graph_block(text: &str) -> Result<(&str, &str, &str)> {
    let start = text.find(GRAPH_BEGIN).with_context(|| {
        format!("ARCHITECTURE.md has no crate graph block; add the line\n{GRAPH_BEGIN}\n{GRAPH_END}\nand run `cargo xtask layering --write`")
    })?;
    let inner = start + GRAPH_BEGIN.len();
    let end = text[inner..]
        .find(GRAPH_END)
        .map(|i| inner + i)
        .with_context(|| format!("ARCHITECTURE.md: `{GRAPH_END}` is missing"))?;
    Ok((&text[..start], text[inner..end].trim_start_matches('\n'), &text[end + GRAPH_END.len()..]))
}

/// Whether ARCHITECTURE.md's crate graph is the one `cargo metadata` gives.
fn graph_violation(ctx: &Ctx, ws: &Workspace) -> Result<Option<String>> {
    let text = std::fs::read_to_string(ctx.root.join("ARCHITECTURE.md"))
        .context("reading ARCHITECTURE.md")?;
    let (_, written, _) = graph_block(&text)?;
    let actual = crate_graph(ws);
    Ok((written != actual).then(|| {
        format!(
            "ARCHITECTURE.md's crate graph differs from the crates' Cargo.toml files; run \
             `cargo xtask layering --write` and review the change (an edge between our crates is \
             an architecture change). It should read:\n{}",
            indent(&actual, "      ")
        )
    }))
}

/// Runs every layering rule; one error listing every violation.
pub fn check(ctx: &Ctx) -> Result<()> {
    let ws = Workspace::load(ctx)?;
    let mut violations = direct_violations(&ws);
    violations.extend(transitive_violations(ctx, &ws)?);
    violations.extend(graph_violation(ctx, &ws)?);
    violations.extend(module_cycle_violations(ctx, &ws)?);
    if violations.is_empty() {
        eprintln!(
            "layering: ok ({} direct rules over {} crates, {} transitive rules, no pair of \
             modules importing each other)",
            DIRECT_RULES.len() + ONLY_RULES.len(),
            ws.members.len(),
            NO_TRANSITIVE.len()
        );
        return Ok(());
    }
    eprintln!("layering: {} violation(s):", violations.len());
    for v in &violations {
        eprintln!("  - {v}");
    }
    bail!(
        "{} layering rule violation(s) (listed above); see ARCHITECTURE.md for the dependency \
         directions",
        violations.len()
    )
}

fn direct_violations(ws: &Workspace) -> Vec<String> {
    let mut out = only_violations(ws);
    for rule in DIRECT_RULES {
        for m in ws.members.iter().filter(|m| rule.scope.covers(m)) {
            for dep in &m.deps {
                if rule.forbidden.contains(&dep.name.as_str()) && rule.kinds.contains(&dep.kind) {
                    out.push(format!(
                        "`{}` ({}) depends on `{}` as a {}: {}",
                        m.name,
                        m.dir.display(),
                        dep.name,
                        dep.kind.describe(),
                        rule.why
                    ));
                }
            }
        }
    }
    out
}

fn only_violations(ws: &Workspace) -> Vec<String> {
    let ours = |name: &str| ws.members.iter().any(|m| m.name == name);
    let mut out = Vec::new();
    for rule in ONLY_RULES {
        for m in ws.members.iter().filter(|m| m.name == rule.krate) {
            for dep in &m.deps {
                if ours(&dep.name)
                    && !rule.allowed.contains(&dep.name.as_str())
                    && rule.kinds.contains(&dep.kind)
                {
                    out.push(format!(
                        "`{}` depends on `{}` as a {}, but of our crates it may depend only on {}: \
                         {}",
                        m.name,
                        dep.name,
                        dep.kind.describe(),
                        rule.allowed.join(", "),
                        rule.why
                    ));
                }
            }
        }
    }
    out
}

fn transitive_violations(ctx: &Ctx, ws: &Workspace) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for rule in NO_TRANSITIVE {
        if !ws.members.iter().any(|m| m.name == rule.krate) {
            eprintln!(
                "layering: note: `{}` is not a workspace member; skipping its rule",
                rule.krate
            );
            continue;
        }
        let tree = output(&mut ctx.cargo([
            "tree", "--quiet", "-p", rule.krate, "-e", "normal", "--target", "all", "--prefix",
            "none", "--format", "{p}",
        ]))?;
        let prefix = format!("{} v", rule.forbidden);
        if tree.lines().any(|line| line.starts_with(&prefix)) {
            // Show the path(s) that pull it in.
            let path = output(&mut ctx.cargo([
                "tree",
                "--quiet",
                "-p",
                rule.krate,
                "-e",
                "normal",
                "--target",
                "all",
                "-i",
                rule.forbidden,
            ]))
            .unwrap_or_default();
            out.push(format!(
                "`{}` depends on `{}` (through normal dependencies): {}. It comes in through:\n{}",
                rule.krate,
                rule.forbidden,
                rule.why,
                indent(&path, "      ")
            ));
        }
    }
    Ok(out)
}

/// Every pair of modules of a workspace crate that import each other.
fn module_cycle_violations(ctx: &Ctx, ws: &Workspace) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for m in &ws.members {
        let src = ctx.root.join(&m.dir).join("src");
        let files = module_files(&src)?;
        let mut texts = Vec::with_capacity(files.len());
        for (module, path) in files {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            texts.push((module, text));
        }
        for (a, b) in module_cycles(&texts) {
            out.push(format!(
                "in `{}`, modules `{}` and `{}` import each other: move what both need into a \
                 module below them, so the crate reads top-down",
                m.name,
                display_module(&a),
                display_module(&b)
            ));
        }
    }
    Ok(out)
}

fn display_module(module: &str) -> &str {
    if module.is_empty() { "(crate root)" } else { module }
}

/// The crate's modules that have a file under `src` (module path, file): `lib.rs` and `main.rs`
/// are the root (""), `a/b.rs` and `a/b/mod.rs` are `a::b`. `src/bin` holds other crates.
fn module_files(src: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.with_context(|| format!("listing {}", dir.display()))?.path();
            if path.is_dir() {
                if path != src.join("bin") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let Ok(relative) = path.strip_prefix(src) else { continue };
            let mut segments: Vec<String> = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(segments.last().map(String::as_str), Some("mod")) {
                segments.pop();
            }
            if segments.len() == 1 && matches!(segments[0].as_str(), "lib" | "main") {
                segments.clear();
            }
            out.push((segments.join("::"), path));
        }
    }
    out.sort();
    Ok(out)
}

/// The pairs (in name order) of modules that import each other, given each module's path and
/// source text. A module and one of its own descendants are not a pair: the child is a part of
/// the parent split into a file (it reaches the parent's private items through `super::`), and
/// the crate root, which declares every module and re-exports what the crate offers, is the
/// ancestor of all.
fn module_cycles(modules: &[(String, String)]) -> BTreeSet<(String, String)> {
    let known: BTreeSet<&str> = modules.iter().map(|(m, _)| m.as_str()).collect();
    let imports: BTreeMap<&str, BTreeSet<String>> = modules
        .iter()
        .map(|(module, text)| (module.as_str(), module_imports(module, text, &known)))
        .collect();
    let mut out = BTreeSet::new();
    for (a, used) in &imports {
        for b in used {
            let back = imports.get(b.as_str()).is_some_and(|u| u.contains(*a));
            if back && *a < b.as_str() && !is_ancestor(a, b) && !is_ancestor(b, a) {
                out.insert(((*a).to_owned(), b.clone()));
            }
        }
    }
    out
}

/// Whether module `a` contains module `b` (the root contains every module).
fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.strip_prefix(a).is_some_and(|rest| rest.starts_with("::"))
}

/// The other modules (of `known`, the modules that have a file) whose items `module`'s source
/// names: paths from `crate::`, `super::` and `self::` (inline `mod x { .. }` blocks move
/// `super` and `self`), and paths through a child module (`child::item`). A path names the
/// deepest module with a file that it passes through.
fn module_imports(module: &str, text: &str, known: &BTreeSet<&str>) -> BTreeSet<String> {
    let tokens = tokens(&code_only(text));
    let here: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d > depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                if let Some(name) = tokens.get(i + 1) {
                    inline.push((name.clone(), depth + 1));
                }
            }
            _ if tokens.get(i + 1).is_some_and(|t| t == "::")
                && (i == 0 || tokens[i - 1] != "::") =>
            {
                let mut base: Vec<String> = here.iter().map(|s| (*s).to_owned()).collect();
                base.extend(inline.iter().map(|(name, _)| name.clone()));
                let (paths, next) = path_tree(&tokens, i);
                for path in paths {
                    if let Some(target) = resolve(&base, &path, known)
                        && target != module
                    {
                        out.insert(target);
                    }
                }
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The module with a file that `path` (as written in module `base`) passes through last, if the
/// path is one of ours: it starts with `crate`, `super`, `self` or a child module with a file.
fn resolve(base: &[String], path: &[String], known: &BTreeSet<&str>) -> Option<String> {
    let mut full: Vec<String> = Vec::new();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => rest = &path[1..],
        Some("self") => {
            full = base.to_vec();
            rest = &path[1..];
        }
        Some("super") => {
            full = base.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                full.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            let mut child = base.to_vec();
            child.push(first.to_owned());
            if !known.contains(child.join("::").as_str()) {
                return None;
            }
            full = base.to_vec();
        }
        None => return None,
    }
    full.extend(rest.iter().cloned());
    (0..=full.len()).rev().map(|n| full[..n].join("::")).find(|m| known.contains(m.as_str()))
}

/// The paths of a `use` tree or an expression path starting at `tokens[start]` (braces expanded,
/// `self` inside braces is the prefix itself, `as` renames and `*` end a path), and the index
/// after it.
fn path_tree(tokens: &[String], start: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = vec![tokens[start].clone()];
    let mut i = start + 1;
    let mut out = Vec::new();
    while tokens.get(i).is_some_and(|t| t == "::") {
        match tokens.get(i + 1).map(String::as_str) {
            Some("{") => {
                i += 2;
                loop {
                    match tokens.get(i).map(String::as_str) {
                        None => return (out, i),
                        Some("}") => return (out, i + 1),
                        Some(",") => i += 1,
                        Some("self") => {
                            out.push(prefix.clone());
                            i += 1;
                        }
                        Some(t) if is_ident(t) => {
                            let (inner, next) = path_tree(tokens, i);
                            for tail in inner {
                                let mut path = prefix.clone();
                                path.extend(tail);
                                out.push(path);
                            }
                            i = next;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            Some(t) if is_ident(t) => {
                prefix.push(t.to_owned());
                i += 2;
            }
            _ => break,
        }
    }
    out.push(prefix);
    (out, i)
}

fn is_ident(token: &str) -> bool {
    token.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// Identifiers, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut end = at + c.len_utf8();
            while let Some(&(next, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = next + d.len_utf8();
                chars.next();
            }
            out.push(code[at..end].to_owned());
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            out.push("::".to_owned());
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

/// `text` with comments, string and character literals blanked out (so a path in a doc comment
/// or a message is not an import). Lifetimes are kept as they are.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut nesting = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    nesting += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    nesting -= 1;
                    i += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
        {
            // A raw string: r"..." or r#"..."#.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            while i < chars.len() {
                if chars[i] == '"'
                    && chars[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            // An escaped character literal: '\n', '\'', '\u{..}'.
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn indent(text: &str, pad: &str) -> String {
    text.lines().map(|l| format!("{pad}{l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, dir: &str, deps: &[(&str, DepKind)]) -> Member {
        Member {
            name: name.into(),
            dir: dir.into(),
            deps: deps.iter().map(|(n, k)| Dep { name: (*n).into(), kind: *k }).collect(),
            benches: vec![],
        }
    }

    fn ws(members: Vec<Member>) -> Workspace {
        Workspace { members, target_dir: "target".into() }
    }

    #[test]
    fn the_crate_graph_lists_each_crate_above_what_it_depends_on() {
        let w = ws(vec![
            member("llooma-api", "crates/llooma-api", &[("llooma-core", DepKind::Normal)]),
            member(
                "llooma-core",
                "crates/llooma-core",
                &[("llooma-types", DepKind::Normal), ("tokio", DepKind::Normal)],
            ),
            member("llooma-types", "crates/llooma-types", &[("llooma-api", DepKind::Dev)]),
        ]);
        assert_eq!(
            crate_graph(&w),
            "```text\nllooma-api   -> llooma-core\nllooma-core  -> llooma-types\n\
             llooma-types -> (none of ours)\n```\n"
        );
    }

    #[test]
    fn allowed_edges_pass() {
        let w = ws(vec![
            member("llooma-store", "crates/llooma-store", &[("sea-orm", DepKind::Normal)]),
            member("llooma-net", "crates/llooma-net", &[("hyper", DepKind::Normal)]),
            member(
                "llooma-api",
                "crates/llooma-api",
                &[("reqwest", DepKind::Dev), ("anyhow", DepKind::Dev)],
            ),
            member("llooma-server", "apps/llooma-server", &[("anyhow", DepKind::Normal)]),
            member("xtask", "xtask", &[("anyhow", DepKind::Normal)]),
        ]);
        assert!(direct_violations(&w).is_empty());
    }

    #[test]
    fn forbidden_edges_are_named() {
        let w = ws(vec![
            member(
                "llooma-api",
                "crates/llooma-api",
                &[("sea-orm", DepKind::Normal), ("reqwest", DepKind::Normal)],
            ),
            member("llooma-policy", "crates/llooma-policy", &[("anyhow", DepKind::Normal)]),
            member(
                "llooma-e2e",
                "tests",
                &[("sea-orm", DepKind::Normal), ("reqwest", DepKind::Normal)],
            ),
            member("llooma-migration", "migrations", &[("eyre", DepKind::Build)]),
            member("llooma-net", "crates/llooma-net", &[("reqwest", DepKind::Normal)]),
        ]);
        let v = direct_violations(&w);
        assert_eq!(v.len(), 6, "{v:#?}");
        assert!(v.iter().any(|s| s.contains("`llooma-net`") && s.contains("`reqwest`")));
        assert!(v[0].contains("`llooma-api`") && v[0].contains("`sea-orm`"));
        assert!(v.iter().any(|s| s.contains("`llooma-e2e`") && s.contains("`sea-orm`")));
        assert!(v.iter().any(|s| s.contains("`llooma-api`") && s.contains("`reqwest`")));
        assert!(v.iter().any(|s| s.contains("`llooma-policy`") && s.contains("`anyhow`")));
        assert!(v.iter().any(|s| s.contains("`llooma-migration`") && s.contains("`eyre`")));
    }

    #[test]
    fn the_api_may_use_only_the_core_the_types_and_the_vault_of_ours() {
        let ours = |name: &str, dir: &str| member(name, dir, &[]);
        let w = ws(vec![
            member(
                "llooma-api",
                "crates/llooma-api",
                &[
                    ("llooma-core", DepKind::Normal),
                    ("llooma-types", DepKind::Normal),
                    ("llooma-vault", DepKind::Normal),
                    ("llooma-store", DepKind::Normal),
                    ("llooma-test-support", DepKind::Dev),
                    ("axum", DepKind::Normal),
                ],
            ),
            member(
                "llooma-store",
                "crates/llooma-store",
                &[("llooma-chatto-bot", DepKind::Normal)],
            ),
            ours("llooma-core", "crates/llooma-core"),
            ours("llooma-types", "crates/llooma-types"),
            ours("llooma-vault", "crates/llooma-vault"),
            ours("llooma-chatto-bot", "crates/llooma-chatto-bot"),
            ours("llooma-test-support", "crates/llooma-test-support"),
        ]);
        let v = direct_violations(&w);
        assert_eq!(v.len(), 3, "{v:#?}");
        assert!(v[0].contains("`llooma-api` depends on `llooma-store`"), "{v:#?}");
        assert!(
            v.iter().any(|s| s.contains("`llooma-store`") && s.contains("`llooma-chatto-bot`"))
        );
        assert!(v.iter().filter(|s| s.contains("`llooma-chatto-bot`")).count() == 2, "{v:#?}");
    }

    fn cycles(modules: &[(&str, &str)]) -> Vec<(String, String)> {
        let owned: Vec<(String, String)> =
            modules.iter().map(|(m, t)| ((*m).to_owned(), (*t).to_owned())).collect();
        module_cycles(&owned).into_iter().collect()
    }

    fn pair(a: &str, b: &str) -> (String, String) {
        (a.to_owned(), b.to_owned())
    }

    #[test]
    fn two_modules_importing_each_other_are_a_cycle_however_the_path_is_written() {
        // `use crate::x`, braces, a path in an expression, `super::` from a sibling file.
        let found = cycles(&[
            ("", "mod app; mod pages; mod api; pub use app::App;"),
            ("app", "use crate::{api, pages::Settings};\nfn f() { crate::api::call(); }"),
            ("pages", "use super::app::TopBar;"),
            ("api", "use crate::model::Page;"),
            ("model", "pub struct Page;"),
        ]);
        assert_eq!(found, vec![pair("app", "pages")]);
    }

    #[test]
    fn nested_siblings_and_child_paths_count_but_a_parent_and_its_child_are_no_pair() {
        let found = cycles(&[
            ("", ""),
            // A parent using its child and the child using its parent: one module in two files.
            ("net", "mod http; mod error; pub fn f() { http::get(); }"),
            ("net::http", "use super::f; use super::error::Error;"),
            ("net::error", "use crate::net::http::Status;"),
            ("other", "use crate::net::error::Error;"),
        ]);
        assert_eq!(found, vec![pair("net::error", "net::http")]);
    }

    #[test]
    fn one_way_imports_tests_comments_and_strings_are_not_cycles() {
        let found = cycles(&[
            ("", "pub use a::A; fn g() {}"),
            // `super::*` in an inline test module is the file's own module; `crate::g` is the
            // root, which is left out.
            ("a", "use crate::b::B; use crate::g;\n#[cfg(test)]\nmod tests { use super::*; }"),
            (
                "b",
                "// use crate::a::A;\n/* crate::a::A /* nested */ */\nconst S: &str = \"crate::a::A\";\n\
                 const R: &str = r#\"crate::a\"#; fn h<'x>(c: char) -> bool { c == '\"' }\n\
                 pub struct B;",
            ),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn inline_modules_move_super_and_self() {
        let found = cycles(&[
            ("", ""),
            ("a", "mod inner { use super::super::b::B; }"),
            ("b", "mod inner { mod deeper { use crate::a::A; } }"),
        ]);
        assert_eq!(found, vec![pair("a", "b")]);
        // Inside `inner`, `self::b` is `a::inner::b`, not the sibling `b`.
        let found =
            cycles(&[("", ""), ("a", "mod inner { use self::b::B; }"), ("b", "use crate::a::A;")]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn module_files_map_to_module_paths() {
        let dir = std::env::temp_dir().join(format!("xtask-modules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for file in ["lib.rs", "a.rs", "a/b.rs", "c/mod.rs", "bin/tool.rs", "notes.txt"] {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "").unwrap();
        }
        let found: Vec<String> =
            module_files(&dir).unwrap().into_iter().map(|(module, _)| module).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found, vec!["", "a", "a::b", "c"]);
    }
}
