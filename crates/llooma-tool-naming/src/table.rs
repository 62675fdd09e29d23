//! [`NameTable`]: model-facing names for a whole catalogue, and the way back.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use crate::error::NamingError;
use crate::name::{RESERVED_MCP_NAMES, candidate_name, hash_hex, slugify, with_hash_suffix};

/// One tool of the catalogue with the name the model sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedTool<S> {
    /// The server it belongs to.
    pub server: S,
    /// The name the server gave it, untouched; this is what a call is sent with.
    pub tool: String,
    /// `mcp_<server>_<tool>`, valid and unique in the table.
    pub model_name: String,
}

/// The model-facing names of every tool of an account's servers, built in one go so that they
/// are unique, and the map back from a model-facing name to `(server, original tool name)`.
///
/// A name is never parsed: [`NameTable::resolve`] is a lookup in the map built together with the
/// names. Build the table from the whole stored catalogue (not only what the budget lets through)
/// so that a tool's name does not depend on which other tools happen to be switched on.
///
/// # How a name is made
///
/// 1. `mcp_` + the server's stored slug (re-slugified defensively) + `_` + the tool name with
///    every run of characters outside `[a-zA-Z0-9_-]` replaced by one `_`.
/// 2. Longer than 64 characters: cut to 55 and suffixed `_<8 hex of SHA-256(slug, original)>`,
///    so two long names differing only at the end stay apart.
/// 3. Collisions (compared ignoring ASCII case, and including [`RESERVED_MCP_NAMES`]): among the
///    tools sharing a candidate, the one whose name needed no sanitising wins, then the smallest
///    original name, then the smallest server id; it keeps the plain name. The others get
///    `_<8 hex of SHA-256(slug, original, salt)>`, salt raised until free. Everything is sorted
///    first, so the result does not depend on input order.
///
/// A tool's name depends only on its slug and its own name unless it collides; a new colliding
/// tool can move a non-verbatim tool onto a suffixed name, which only happens when a catalogue
/// contains two tools that sanitise to the same thing.
#[derive(Clone, Debug)]
pub struct NameTable<S> {
    entries: Vec<NamedTool<S>>,
    /// Entry indices sorted by lower-cased model name, for [`NameTable::resolve`].
    by_model: Vec<usize>,
    /// Per server, its entry indices sorted by tool name, for [`NameTable::model_name`].
    by_server: HashMap<S, Vec<usize>>,
}

/// `a` lower-cased compared with `lower` (already lower-case), without allocating.
fn cmp_ignore_case(a: &str, lower: &str) -> Ordering {
    a.bytes().map(|c| c.to_ascii_lowercase()).cmp(lower.bytes())
}

/// A tool waiting for its final name; its candidate sits in `entries[entry].model_name`.
struct Pending {
    entry: usize,
    slug: usize,
    /// The candidate, ASCII-lower-cased: what uniqueness is judged on.
    key: String,
    verbatim: bool,
}

impl<S> NameTable<S>
where
    S: Clone + Eq + Hash + Ord,
{
    /// Names every tool of `servers`, given as `(server id, stored slug, tool names)` in the order
    /// the account added them. Reserves [`RESERVED_MCP_NAMES`].
    ///
    /// A tool listed twice by the same server is named once.
    ///
    /// # Errors
    ///
    /// [`NamingError::DuplicateServer`] if a server id appears twice.
    pub fn build<I, Sl, T, N>(servers: I) -> Result<Self, NamingError>
    where
        I: IntoIterator<Item = (S, Sl, T)>,
        Sl: AsRef<str>,
        T: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        Self::build_reserving(servers, &[])
    }

    /// Like [`NameTable::build`], keeping `extra_reserved` free as well (for a built-in tool in
    /// the `mcp_` namespace this crate does not know about).
    ///
    /// # Errors
    ///
    /// [`NamingError::DuplicateServer`] if a server id appears twice.
    pub fn build_reserving<I, Sl, T, N>(
        servers: I,
        extra_reserved: &[&str],
    ) -> Result<Self, NamingError>
    where
        I: IntoIterator<Item = (S, Sl, T)>,
        Sl: AsRef<str>,
        T: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        let mut entries: Vec<NamedTool<S>> = Vec::new();
        let mut by_server: HashMap<S, Vec<usize>> = HashMap::new();
        let mut slugs: Vec<String> = Vec::new();
        let mut pending: Vec<Pending> = Vec::new();

        for (position, (server, slug, tools)) in servers.into_iter().enumerate() {
            if by_server.contains_key(&server) {
                return Err(NamingError::DuplicateServer { position });
            }
            let slug = slugify(slug.as_ref());
            let tools: Vec<String> = tools.into_iter().map(|t| t.as_ref().to_owned()).collect();
            // Drop repeats, keeping each tool's first position; the same sort gives the server's
            // lookup index.
            let mut order: Vec<usize> = (0..tools.len()).collect();
            order.sort_unstable_by(|&a, &b| tools[a].cmp(&tools[b]).then(a.cmp(&b)));
            let mut keep = vec![false; tools.len()];
            let mut previous: Option<&str> = None;
            for &i in &order {
                let tool = tools[i].as_str();
                keep[i] = previous != Some(tool);
                previous = Some(tool);
            }
            let mut entry_of = vec![0; tools.len()];
            for (i, tool) in tools.into_iter().enumerate() {
                if !keep[i] {
                    continue;
                }
                entry_of[i] = entries.len();
                let (candidate, verbatim) = candidate_name(&slug, &tool);
                pending.push(Pending {
                    entry: entries.len(),
                    slug: slugs.len(),
                    key: candidate.to_ascii_lowercase(),
                    verbatim,
                });
                entries.push(NamedTool { server: server.clone(), tool, model_name: candidate });
            }
            let own: Vec<usize> =
                order.into_iter().filter(|&i| keep[i]).map(|i| entry_of[i]).collect();
            slugs.push(slug);
            by_server.insert(server, own);
        }

        // Total order over pending tools, independent of input order: (server, tool) is unique.
        pending.sort_unstable_by(|a, b| {
            let (ea, eb) = (&entries[a.entry], &entries[b.entry]);
            a.key
                .cmp(&b.key)
                .then(b.verbatim.cmp(&a.verbatim))
                .then_with(|| ea.tool.cmp(&eb.tool))
                .then_with(|| ea.server.cmp(&eb.server))
        });

        let is_reserved = |name: &str| {
            RESERVED_MCP_NAMES.iter().chain(extra_reserved).any(|r| r.eq_ignore_ascii_case(name))
        };

        // First pass: the first of each run of equal candidates keeps it, unless it is reserved.
        let mut winners: Vec<usize> = Vec::with_capacity(pending.len());
        let mut losers: Vec<usize> = Vec::new();
        let mut previous: Option<&str> = None;
        for (i, p) in pending.iter().enumerate() {
            let first_of_run = previous != Some(p.key.as_str());
            previous = Some(p.key.as_str());
            if !first_of_run || is_reserved(&p.key) { losers.push(i) } else { winners.push(i) }
        }

        // Second pass: everyone else gets a hash suffix, in the same sorted order, avoiding the
        // plain names kept above (all candidates in `pending`), the reserved names and each other.
        // `pending` keeps the candidates, so look them up before overwriting any.
        let mut suffixed: HashSet<String> = HashSet::new();
        let mut renamed: Vec<(String, usize, String)> = Vec::with_capacity(losers.len());
        for i in losers {
            let Some(p) = pending.get(i) else { continue };
            let entry = &entries[p.entry];
            let slug = &slugs[p.slug];
            let mut salt: u32 = 0;
            loop {
                let name =
                    with_hash_suffix(&entry.model_name, &hash_hex(b"col", slug, &entry.tool, salt));
                let key = name.to_ascii_lowercase();
                let held_by_candidate =
                    pending.binary_search_by(|q| q.key.as_str().cmp(key.as_str())).is_ok();
                if !held_by_candidate && !is_reserved(&key) && !suffixed.contains(&key) {
                    suffixed.insert(key.clone());
                    renamed.push((key, p.entry, name));
                    break;
                }
                salt = salt.wrapping_add(1);
            }
        }

        // `by_model` is sorted by lower-cased name: the winners already are (that is the pending
        // order), the few renamed ones are merged in.
        renamed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut by_model: Vec<usize> = Vec::with_capacity(entries.len());
        let mut renamed = renamed.into_iter().peekable();
        for w in winners {
            let Some(p) = pending.get(w) else { continue };
            while let Some((_, entry, name)) = renamed.next_if(|(key, _, _)| *key < p.key) {
                entries[entry].model_name = name;
                by_model.push(entry);
            }
            by_model.push(p.entry);
        }
        for (_, entry, name) in renamed {
            entries[entry].model_name = name;
            by_model.push(entry);
        }

        Ok(Self { entries, by_model, by_server })
    }

    /// The model-facing name of `tool` on `server`, if the table has it.
    pub fn model_name(&self, server: &S, tool: &str) -> Option<&str> {
        let own = self.by_server.get(server)?;
        let at = own.binary_search_by(|&i| self.tool_at(i).cmp(tool)).ok()?;
        let i = *own.get(at)?;
        self.entries.get(i).map(|e| e.model_name.as_str())
    }

    /// The server and original tool name behind a model-facing name. Exact match only: a name
    /// the model made up, or changed the case of, resolves to nothing.
    pub fn resolve(&self, model_name: &str) -> Option<(&S, &str)> {
        // Unique ignoring case, so at most one entry has this lower-cased name.
        let lower = model_name.to_ascii_lowercase();
        let at = self
            .by_model
            .binary_search_by(|&i| cmp_ignore_case(self.model_name_at(i), &lower))
            .ok()?;
        let entry = self.entries.get(*self.by_model.get(at)?)?;
        (entry.model_name == model_name).then_some((&entry.server, entry.tool.as_str()))
    }

    fn tool_at(&self, i: usize) -> &str {
        self.entries.get(i).map_or("", |e| e.tool.as_str())
    }

    fn model_name_at(&self, i: usize) -> &str {
        self.entries.get(i).map_or("", |e| e.model_name.as_str())
    }
}

impl<S> NameTable<S> {
    /// Every named tool, servers in input order, each server's tools in its own order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &NamedTool<S>> {
        self.entries.iter()
    }

    /// How many tools the table names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table names no tool at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
