//! A crate's module layout read from its source files: which file refers to
//! which (`use crate::…`, `use super::…`, `use self::…`, and `crate::…` or
//! `super::…` paths in code), the import graph between files and its
//! circles. `tests/tests/layout.rs` enforces the library's import rules
//! with it.
//!
//! Plain text scanning, no Rust parser: `//` and `/* */` comments (doc
//! comments and their intra-doc links with them) are blanked first (string
//! literals are not recognised); a `#[cfg(test)] mod tests {` block and
//! everything after it is the file's test module; brace groups in `use`
//! are expanded and `as` renames dropped; the paths inside a `use`
//! statement are not counted again as paths in code; a path resolves to
//! the longest prefix that is a file (`a/b.rs` or `a/b/mod.rs`). A module
//! is the path of its file under `src/`, so `lib.rs` and `main.rs` are both
//! the crate root, and a `#[path]` file such as `plan_tests.rs` is a module
//! of its own name.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::ops::Range;
use std::path::Path;

/// A module as the path of its file under `src/` without `.rs`, `mod.rs`,
/// `lib.rs` or `main.rs`: `obc/reconcile/claim.rs` is
/// `["obc", "reconcile", "claim"]`; the crate root is `[]`.
pub type Module = Vec<String>;

/// How a file refers to a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `use …;` (not public).
    Use,
    /// `pub use …;` or `pub(…) use …;`: a re-export.
    ReExport,
    /// A `crate::…` or `super::…` path in code.
    Path,
}

/// One path one file refers to.
#[derive(Clone, Debug)]
pub struct Reference {
    /// The file, as `<label>/<path under src>`.
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// The `use` statement on one line, or the source line of a path.
    pub text: String,
    pub kind: Kind,
    /// The path as written, a brace group expanded: `crate::obc::api::X`
    /// is `["crate", "obc", "api", "X"]`.
    pub written: Vec<String>,
    /// The path from the crate root: `["obc", "api", "X"]`.
    pub path: Vec<String>,
    /// The module of the referring file.
    pub from: Module,
    /// The file the path resolves to (the longest prefix that is a file).
    pub target: Option<Module>,
    /// In the file's `#[cfg(test)] mod tests { … }` block.
    pub in_tests: bool,
}

impl Reference {
    /// `file:line: text`.
    pub fn location(&self) -> String {
        format!("{}:{}: {}", self.file, self.line, self.text)
    }

    /// Whether the path starts with `crate`, `super` or `self` (not with the
    /// bare name of a child module).
    pub fn is_qualified(&self) -> bool {
        matches!(
            self.written.first().map(String::as_str),
            Some("crate" | "super" | "self")
        )
    }

    /// Whether this reference makes an edge of the import graph: a `use` or
    /// a path in code, qualified, outside tests, to another file.
    /// Re-exports and a parent's bare references to its children are not.
    pub fn is_edge(&self) -> bool {
        self.kind != Kind::ReExport
            && self.is_qualified()
            && !self.in_tests
            && self.target.as_ref().is_some_and(|t| *t != self.from)
    }
}

/// A set of files that import each other, directly or through each other.
#[derive(Debug)]
pub struct Circle {
    /// The files' modules, sorted.
    pub modules: Vec<Module>,
    /// Every edge between them (from, to) with one reference that makes it.
    pub edges: Vec<(Module, Module, Reference)>,
}

/// The files under one `src/` directory and what they refer to.
#[derive(Debug)]
pub struct Tree {
    label: String,
    /// Module -> its files (both `lib.rs` and `main.rs` for the root).
    modules: BTreeMap<Module, Vec<String>>,
    pub refs: Vec<Reference>,
}

impl Tree {
    /// Reads every `.rs` file under `root/src_dir`; files are shown as
    /// `src_dir/...`.
    pub fn read(root: &Path, src_dir: &str) -> io::Result<Tree> {
        let mut files = Vec::new();
        read_rs_files(&root.join(src_dir), "", &mut files)?;
        Ok(Tree::parse(src_dir, &files))
    }

    /// `files`: (path under `src/`, text).
    pub fn parse(label: &str, files: &[(String, String)]) -> Tree {
        let mut tree = Tree {
            label: label.to_owned(),
            modules: BTreeMap::new(),
            refs: Vec::new(),
        };
        for (path, _) in files {
            let shown = tree.shown(path);
            tree.modules.entry(module_of(path)).or_default().push(shown);
        }
        for (path, text) in files {
            let refs = tree.scan_file(path, text);
            tree.refs.extend(refs);
        }
        tree
    }

    /// The module's file(s), as shown in messages.
    pub fn file_of(&self, module: &Module) -> String {
        match self.modules.get(module) {
            Some(files) => files.join(" + "),
            None => format!("{}/{}", self.label, module.join("/")),
        }
    }

    /// The top-level modules: `core`, `obc`, ...
    pub fn top_level(&self) -> BTreeSet<&str> {
        self.modules
            .keys()
            .filter_map(|m| m.first().map(String::as_str))
            .collect()
    }

    /// The import graph: (from, to) -> the references that make the edge.
    pub fn edges(&self) -> BTreeMap<(Module, Module), Vec<&Reference>> {
        let mut edges: BTreeMap<_, Vec<_>> = BTreeMap::new();
        for r in self.refs.iter().filter(|r| r.is_edge()) {
            if let Some(target) = &r.target {
                edges
                    .entry((r.from.clone(), target.clone()))
                    .or_default()
                    .push(r);
            }
        }
        edges
    }

    /// The circles of the import graph (its strongly connected components
    /// of more than one file), in the order of their first module.
    pub fn circles(&self) -> Vec<Circle> {
        let edges = self.edges();
        let mut graph: BTreeMap<&Module, Vec<&Module>> = BTreeMap::new();
        for (from, to) in edges.keys() {
            graph.entry(from).or_default().push(to);
        }
        let mut circles: Vec<Circle> = Tarjan::components(self.modules.keys(), &graph)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|modules| circle(modules, &edges))
            .collect();
        circles.sort_by(|a, b| a.modules.cmp(&b.modules));
        circles
    }

    fn shown(&self, path: &str) -> String {
        if self.label.is_empty() {
            path.to_owned()
        } else {
            format!("{}/{path}", self.label)
        }
    }

    /// The modules declared under `module` one level down.
    fn children(&self, module: &[String]) -> BTreeSet<&str> {
        self.modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .filter_map(|m| m.last().map(String::as_str))
            .collect()
    }

    /// The longest prefix of `path` that is a file.
    fn resolve(&self, path: &[String]) -> Option<Module> {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|m| self.modules.contains_key(m))
    }

    fn scan_file(&self, path: &str, text: &str) -> Vec<Reference> {
        let code = strip_comments(text);
        let cut = tests_start(&code).unwrap_or(code.len());
        let file = File {
            shown: self.shown(path),
            module: module_of(path),
            lines: text.lines().collect(),
            code: &code,
        };
        let mut refs = self.scan(&file, 0..cut, false);
        refs.extend(self.scan(&file, cut..code.len(), true));
        refs
    }

    /// The references in `file.code[part]`.
    fn scan(&self, file: &File, part: Range<usize>, in_tests: bool) -> Vec<Reference> {
        let mut scope = file.module.clone();
        if in_tests {
            scope.push("tests".to_owned());
        }
        let children = self.children(&scope);
        let heads =
            |head: &str| matches!(head, "crate" | "super" | "self") || children.contains(head);
        let code = &file.code[part.clone()];
        let uses = use_statements(code, heads);
        let mut found = Vec::new();
        for u in &uses {
            let kind = if u.public { Kind::ReExport } else { Kind::Use };
            let text = one_line(&code[u.start..u.end]);
            let at = part.start + u.start;
            for written in expand(&[], &u.body) {
                found.push(Found {
                    at,
                    kind,
                    text: text.clone(),
                    written,
                });
            }
        }
        let rest = blank_ranges(code, uses.iter().map(|u| (u.start, u.end)));
        for (at, written) in code_paths(&rest) {
            let at = part.start + at;
            let text = file.line(at);
            found.push(Found {
                at,
                kind: Kind::Path,
                text,
                written,
            });
        }
        found.sort_by_key(|f| f.at);
        let site = Site { scope, in_tests };
        found
            .into_iter()
            .map(|f| self.reference(file, &site, f))
            .collect()
    }

    fn reference(&self, file: &File, site: &Site, found: Found) -> Reference {
        let path = absolute(&site.scope, &found.written);
        Reference {
            file: file.shown.clone(),
            line: line_of(file.code, found.at),
            text: found.text,
            kind: found.kind,
            target: self.resolve(&path),
            written: found.written,
            path,
            from: file.module.clone(),
            in_tests: site.in_tests,
        }
    }
}

/// One file being scanned.
struct File<'a> {
    shown: String,
    module: Module,
    lines: Vec<&'a str>,
    /// The text, comments blanked.
    code: &'a str,
}

impl File<'_> {
    /// The source line of byte `at`, trimmed.
    fn line(&self, at: usize) -> String {
        let line = self.lines.get(line_of(self.code, at) - 1);
        line.map_or(String::new(), |l| l.trim().to_owned())
    }
}

/// A reference found at byte `at` of a file.
struct Found {
    at: usize,
    kind: Kind,
    text: String,
    written: Vec<String>,
}

/// Where references are made: the module paths resolve from (the file's,
/// or its test module), and whether that is the test module.
struct Site {
    scope: Module,
    in_tests: bool,
}

/// The module of a file: `a/b.rs` and `a/b/mod.rs` are `["a", "b"]`;
/// `lib.rs` and `main.rs` are the root.
pub fn module_of(path: &str) -> Module {
    let path = path.strip_suffix(".rs").unwrap_or(path);
    let mut parts: Module = path.split('/').map(str::to_owned).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Shows a module as its path: `obc/reconcile/claim`, or `<root>`.
pub fn name(module: &Module) -> String {
    if module.is_empty() {
        "<root>".to_owned()
    } else {
        module.join("/")
    }
}

fn read_rs_files(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) -> io::Result<()> {
    let mut entries = std::fs::read_dir(dir)?.collect::<io::Result<Vec<_>>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        if entry.file_type()?.is_dir() {
            read_rs_files(&entry.path(), &format!("{rel}/"), out)?;
        } else if name.ends_with(".rs") {
            out.push((rel, std::fs::read_to_string(entry.path())?));
        }
    }
    Ok(())
}

/// The text with `//` comments, then `/* */` comments, replaced by spaces
/// (newlines kept, so offsets and line numbers stay those of the file).
/// Like the prototype, strings are not recognised.
pub fn strip_comments(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let mut at = 0;
    while let Some(start) = find(&bytes, b"//", at) {
        let end = find(&bytes, b"\n", start).unwrap_or(bytes.len());
        blank(&mut bytes, start, end);
        at = end;
    }
    at = 0;
    while let Some(start) = find(&bytes, b"/*", at) {
        let Some(end) = find(&bytes, b"*/", start + 2) else {
            break;
        };
        blank(&mut bytes, start, end + 2);
        at = end + 2;
    }
    // Only whole characters became spaces: still UTF-8.
    String::from_utf8_lossy(&bytes).into_owned()
}

fn find(bytes: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| from + i)
}

/// Spaces over `bytes[start..end]`, newlines kept.
fn blank(bytes: &mut [u8], start: usize, end: usize) {
    for b in &mut bytes[start..end] {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

fn blank_ranges(code: &str, ranges: impl Iterator<Item = (usize, usize)>) -> String {
    let mut bytes = code.as_bytes().to_vec();
    for (start, end) in ranges {
        blank(&mut bytes, start, end);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Where the test module starts: `#[cfg(test)]`, blanks, `mod tests`,
/// blanks, `{`.
fn tests_start(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = code[from..].find("#[cfg(test)]") {
        let at = from + i;
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        if let Some(rest) = rest.strip_prefix("mod tests")
            && rest.trim_start().starts_with('{')
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// One `use` statement: `code[start..end]` from `pub` or `use` to `;`.
struct UseStatement {
    start: usize,
    end: usize,
    public: bool,
    /// The tree after `use`: `crate::a::{b, c::D}`.
    body: String,
}

/// The `use` statements whose path starts with a head `heads` accepts,
/// followed by `::`.
fn use_statements(code: &str, heads: impl Fn(&str) -> bool) -> Vec<UseStatement> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("use") {
        let at = from + i;
        from = at + 3;
        let body_start = from + (code[from..].len() - code[from..].trim_start().len());
        if (at > 0 && is_ident(bytes[at - 1])) || body_start == from {
            continue;
        }
        let Some(len) = code[body_start..].find(';') else {
            break;
        };
        let body = &code[body_start..body_start + len];
        if !body.split_once("::").is_some_and(|(head, _)| heads(head)) {
            continue;
        }
        let (start, public) = visibility(code, at);
        from = body_start + len + 1;
        found.push(UseStatement {
            start,
            end: from,
            public,
            body: body.to_owned(),
        });
    }
    found
}

/// Where the statement whose `use` is at `at` starts, and whether it is
/// `pub` or `pub(…)`.
fn visibility(code: &str, at: usize) -> (usize, bool) {
    let before = code[..at].trim_end();
    let before = match before.strip_suffix(')') {
        Some(b) => b.rfind('(').map_or(before, |open| &b[..open]),
        None => before,
    };
    match before.strip_suffix("pub") {
        Some(rest) if !rest.bytes().last().is_some_and(is_ident) => (rest.len(), true),
        _ => (at, false),
    }
}

/// The paths a use tree names, brace groups expanded and `as` renames
/// dropped: `a::{b, c::{d, e as f}}` is `a::b`, `a::c::d`, `a::c::e`.
pub fn expand(prefix: &[String], body: &str) -> Vec<Vec<String>> {
    let body = body.trim();
    if let Some(inner) = body.strip_prefix('{') {
        let inner = inner.strip_suffix('}').unwrap_or(inner);
        return split_top_level(inner)
            .into_iter()
            .filter(|item| !item.trim().is_empty())
            .flat_map(|item| expand(prefix, item))
            .collect();
    }
    if let Some(open) = body.find('{') {
        let mut prefix = prefix.to_vec();
        prefix.extend(segments(&body[..open]));
        return expand(&prefix, &body[open..]);
    }
    let path = body.split_whitespace().next().unwrap_or("");
    let mut out = prefix.to_vec();
    out.extend(segments(path));
    vec![out]
}

fn segments(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Splits at the commas outside braces.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// The `crate::…` and `super::…` paths in `code` (at least one segment
/// after the head; not preceded by a name or `::`), with their offsets.
fn code_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let starts = bytes[at..].starts_with(b"crate::") || bytes[at..].starts_with(b"super::");
        let free = at == 0 || !(is_ident(bytes[at - 1]) || bytes[at - 1] == b':');
        let len = if starts && free {
            path_len(&bytes[at..])
        } else {
            0
        };
        if len > "crate".len() {
            found.push((at, segments(&code[at..at + len]).collect()));
            at += len;
        } else {
            at += 1;
        }
    }
    found
}

/// The length of `head(::name)*` at the start of `bytes`, whose head is
/// `crate` or `super` (both five letters).
fn path_len(bytes: &[u8]) -> usize {
    let mut len = "crate".len();
    while bytes[len..].starts_with(b"::") {
        let name = bytes[len + 2..]
            .iter()
            .take_while(|b| is_ident(**b))
            .count();
        if name == 0 {
            break;
        }
        len += 2 + name;
    }
    len
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The path from the crate root of `written`, used in module `scope`.
fn absolute(scope: &[String], written: &[String]) -> Vec<String> {
    if written.first().is_some_and(|h| h == "crate") {
        return written[1..].to_vec();
    }
    let mut path = scope.to_vec();
    let mut rest = written;
    while let Some((head, tail)) = rest.split_first() {
        match head.as_str() {
            "super" => {
                path.pop();
            }
            "self" => {}
            _ => break,
        }
        rest = tail;
    }
    // `a::{self, …}`: `a`.
    path.extend(rest.iter().filter(|s| *s != "self").cloned());
    path
}

/// The 1-based line of byte `at`.
fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// A statement on one line: blanks collapsed.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("{ ", "{")
        .replace(", }", "}")
        .replace(" }", "}")
}

/// The circle of `modules` with one reference for each edge in it.
fn circle(mut modules: Vec<Module>, edges: &BTreeMap<(Module, Module), Vec<&Reference>>) -> Circle {
    modules.sort();
    let edges = edges
        .iter()
        .filter(|((a, b), _)| modules.contains(a) && modules.contains(b))
        .filter_map(|((a, b), refs)| Some((a.clone(), b.clone(), (*refs.first()?).clone())))
        .collect();
    Circle { modules, edges }
}

/// Tarjan's strongly connected components.
struct Tarjan<'a> {
    graph: &'a BTreeMap<&'a Module, Vec<&'a Module>>,
    index: BTreeMap<&'a Module, usize>,
    low: BTreeMap<&'a Module, usize>,
    stack: Vec<&'a Module>,
    on_stack: BTreeSet<&'a Module>,
    components: Vec<Vec<Module>>,
}

impl<'a> Tarjan<'a> {
    fn components(
        nodes: impl Iterator<Item = &'a Module>,
        graph: &'a BTreeMap<&'a Module, Vec<&'a Module>>,
    ) -> Vec<Vec<Module>> {
        let mut t = Tarjan {
            graph,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            components: Vec::new(),
        };
        for node in nodes {
            if !t.index.contains_key(node) {
                t.visit(node);
            }
        }
        t.components
    }

    fn visit(&mut self, v: &'a Module) {
        let i = self.index.len();
        self.index.insert(v, i);
        self.low.insert(v, i);
        self.stack.push(v);
        self.on_stack.insert(v);
        for &w in self.graph.get(v).into_iter().flatten() {
            if !self.index.contains_key(w) {
                self.visit(w);
                self.lower(v, self.low[w]);
            } else if self.on_stack.contains(w) {
                self.lower(v, self.index[w]);
            }
        }
        if self.low[v] == self.index[v] {
            self.pop_component(v);
        }
    }

    fn lower(&mut self, v: &'a Module, to: usize) {
        if let Some(low) = self.low.get_mut(v) {
            *low = (*low).min(to);
        }
    }

    fn pop_component(&mut self, v: &'a Module) {
        let mut component = Vec::new();
        while let Some(w) = self.stack.pop() {
            self.on_stack.remove(w);
            component.push(w.clone());
            if w == v {
                break;
            }
        }
        self.components.push(component);
    }
}
