//! Arrows point one way: within each crate that ships (the engine, the workload
//! generator, the functions' common crate, the CLI), no source file imports another that
//! imports it back, directly or through others. A circle makes a reader learn every
//! layer on it at once.
//!
//! The arrows are read from the source text, as a newcomer reads them: `use` trees and
//! `crate::` paths in code (not in comments), `super::sibling::` paths, and a parent
//! module's paths into its own children. An item of a module's own parent or other
//! ancestor (`super::Item`, or `crate::convert::ConvertOptions` from within `convert`) is
//! the parent/child idiom (children implementing what their parent declares), not an
//! arrow. Test modules (`#[cfg(test)] mod`) are left out: they may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path within its crate (`["resolve", "key_set"]`); the crate root is empty.
type Module = Vec<String>;

struct Crate {
    files: BTreeMap<Module, PathBuf>,
    /// Names a module re-exports (`pub use a::b::Name`), to the path they come from.
    reexports: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code: without comment lines (a doc link that points elsewhere is a
/// pointer, not a dependency) and without its test modules.
fn production_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable source file");
    let cut = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("//") {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The leaf paths of a use tree: `a::{b, c::{d, e as f}}` gives `a::b`, `a::c::d`, `a::c::e`.
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let Some(close) = tree.rfind('}') else {
            return Vec::new();
        };
        let prefix: Vec<String> = split_path(tree[..open].trim_end_matches(':'));
        let inner = &tree[open + 1..close];
        let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&inner[start..]);
        return parts
            .into_iter()
            .filter(|p| !p.trim().is_empty())
            .flat_map(use_paths)
            .map(|rest| prefix.iter().cloned().chain(rest).collect())
            .collect();
    }
    let path = tree.split(" as ").next().unwrap_or(tree);
    vec![split_path(path)]
}

fn split_path(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        let files = paths.into_iter().map(|p| (module_of(src, &p), p)).collect();
        let mut krate = Crate {
            files,
            reexports: BTreeMap::new(),
        };
        let mut reexports = BTreeMap::new();
        for (module, path) in &krate.files {
            let text = production_text(path);
            for (public, tree) in use_statements(&text) {
                if !public {
                    continue;
                }
                for segments in use_paths(&tree) {
                    if let Some(absolute) = krate.absolute(module, &segments)
                        && let Some(name) = segments.last().filter(|n| *n != "*" && *n != "self")
                    {
                        reexports
                            .entry(module.clone())
                            .or_insert_with(BTreeMap::new)
                            .insert(name.clone(), absolute);
                    }
                }
            }
        }
        krate.reexports = reexports;
        krate
    }

    /// `segments` as a path from the crate root, if it names something of this crate
    /// that is an arrow (see the file's header).
    fn absolute(&self, module: &Module, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => Some(module.iter().chain(&segments[1..]).cloned().collect()),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let base = &module[..module.len().checked_sub(ups)?];
                let rest = &segments[ups..];
                let mut sibling: Module = base.to_vec();
                sibling.extend(rest.first().cloned());
                // The parent itself: its own items are the parent/child idiom.
                if !self.files.contains_key(&sibling) || rest.len() < 2 {
                    return None;
                }
                Some(base.iter().chain(rest).cloned().collect())
            }
            _ => {
                let mut child = module.clone();
                child.push(first.clone());
                self.files
                    .contains_key(&child)
                    .then(|| module.iter().chain(segments).cloned().collect())
            }
        }
    }

    /// The file an absolute path lands in, following re-exports; with the name taken.
    fn target(&self, path: &[String], hops: usize) -> Option<(Module, String)> {
        for k in (0..=path.len()).rev() {
            let module: Module = path[..k].to_vec();
            if !self.files.contains_key(&module) {
                continue;
            }
            let name = path.get(k).cloned().unwrap_or_else(|| "*".into());
            if let Some(from) = self.reexports.get(&module).and_then(|r| r.get(&name))
                && hops < 8
                && from.as_slice() != path
            {
                let mut next = from.clone();
                next.extend(path[k + 1..].iter().cloned());
                return self.target(&next, hops + 1);
            }
            return Some((module, name));
        }
        None
    }

    /// Every arrow: importing file -> imported file, with the names taken.
    fn arrows(&self) -> BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>> {
        let mut arrows: BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>> = BTreeMap::new();
        for (module, path) in &self.files {
            let text = production_text(path);
            let mut paths: Vec<Vec<String>> = use_statements(&text)
                .into_iter()
                .flat_map(|(_, tree)| use_paths(&tree))
                .collect();
            paths.extend(inline_paths(&text));
            for segments in paths {
                let Some(absolute) = self.absolute(module, &segments) else {
                    continue;
                };
                let Some((to, name)) = self.target(&absolute, 0) else {
                    continue;
                };
                // An ancestor's own items are the parent/child idiom (see the header).
                if !module.starts_with(&to) {
                    arrows
                        .entry(module.clone())
                        .or_default()
                        .entry(to)
                        .or_default()
                        .insert(name);
                }
            }
        }
        arrows
    }
}

/// `use` statements: (whether public, the tree).
fn use_statements(text: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "use ") {
        let before = rest[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let statement = &rest[at + 4..];
        let Some(end) = statement.find(';') else {
            break;
        };
        out.push((public, statement[..end].to_string()));
        rest = &statement[end..];
    }
    out
}

/// `use ` at the start of a statement (not inside an identifier or a string of prose).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().last();
        if before.is_none_or(|c| c.is_whitespace() || c == ';' || c == '{' || c == '}') {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `crate::a::b` and `super::a::b` paths outside `use` statements.
fn inline_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(root) {
            let at = from + i;
            let before = text[..at].chars().last();
            from = at + root.len();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = text[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| at + e);
            out.push(split_path(&text[at..end]));
        }
    }
    out
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn circles(arrows: &BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        arrows: &'a BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        found: Vec<Vec<Module>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, v: &Module) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on_stack.insert(v.clone());
            let next: Vec<Module> = self
                .arrows
                .get(v)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for w in next {
                if !self.index.contains_key(&w) {
                    self.visit(&w);
                    let low = self.low[v].min(self.low[&w]);
                    self.low.insert(v.clone(), low);
                } else if self.on_stack.contains(&w) {
                    let low = self.low[v].min(self.index[&w]);
                    self.low.insert(v.clone(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = &w == v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        arrows,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    let nodes: BTreeSet<Module> = arrows
        .iter()
        .flat_map(|(a, to)| std::iter::once(a.clone()).chain(to.keys().cloned()))
        .collect();
    for v in &nodes {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "lib".into()
    } else {
        module.join("::")
    }
}

/// The circles of one crate, each with its arrows, as text.
fn circles_of(src: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(src);
    let krate = Crate::read(&root);
    let arrows = krate.arrows();
    circles(&arrows)
        .into_iter()
        .map(|circle| {
            let members: BTreeSet<&Module> = circle.iter().collect();
            let mut text = format!(
                "{src}: {}",
                circle.iter().map(name).collect::<Vec<_>>().join(", ")
            );
            for from in &circle {
                for (to, names) in arrows.get(from).into_iter().flatten() {
                    if members.contains(to) {
                        let names: Vec<&str> = names.iter().map(String::as_str).collect();
                        text.push_str(&format!(
                            "\n  {} -> {}: {}",
                            name(from),
                            name(to),
                            names.join(", ")
                        ));
                    }
                }
            }
            text
        })
        .collect()
}

#[test]
fn no_module_of_a_shipped_crate_imports_one_that_imports_it_back() {
    let found: Vec<String> = [
        "shared/src",
        "shared/workload/src",
        "functions/common/src",
        "functions/cli/src",
    ]
    .into_iter()
    .flat_map(circles_of)
    .collect();
    assert!(
        found.is_empty(),
        "module circles (cut one arrow of each):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reading_finds_a_circle_where_there_is_one() {
    // Two files that import each other, one through a re-export, the other by a path in
    // code; a doc link and a test module add no arrow.
    let dir = std::env::temp_dir().join(format!("eqdv-arrows-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).expect("temp dir");
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").expect("write");
    std::fs::write(
        src.join("a.rs"),
        "use crate::b::Thing;\npub struct Other;\n",
    )
    .expect("write");
    std::fs::write(src.join("b/mod.rs"), "mod inner;\npub use inner::Thing;\n").expect("write");
    std::fs::write(
        src.join("b/inner.rs"),
        "/// See [`crate::lib`].\npub struct Thing(crate::a::Other);\n#[cfg(test)]\nmod tests { use crate::lib; }\n",
    )
    .expect("write");
    let krate = Crate::read(&src);
    let found = circles(&krate.arrows());
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        found,
        vec![vec![
            vec!["a".to_string()],
            vec!["b".to_string(), "inner".to_string()]
        ]]
    );
}

/// The engine's readers and formats, below the loaded table: they take what they use of
/// it (a `FileIO`, the name their errors report, a schema), never the whole handle.
const BELOW_THE_TABLE: [&str; 13] = [
    "avro_columns",
    "catalog",
    "columns",
    "current_dv",
    "dv",
    "file_rows",
    "keys",
    "manifest_decode",
    "orc_io",
    "parquet_io",
    "position_deletes",
    "puffin",
    "storage",
];

#[test]
fn the_readers_below_the_table_take_what_they_use_of_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found: Vec<String> = files
        .iter()
        .filter(|file| {
            let module = module_of(&src, file);
            module
                .first()
                .is_some_and(|top| BELOW_THE_TABLE.contains(&top.as_str()))
        })
        .filter(|file| names(&production_text(file), "LoadedTable"))
        .map(|file| file.display().to_string())
        .collect();
    found.sort();
    assert!(
        found.is_empty(),
        "modules below the table that take a LoadedTable (give them what they use): {found:?}"
    );
    // The list names real modules (a renamed one would make the check pass vacuously).
    for module in BELOW_THE_TABLE {
        assert!(
            src.join(format!("{module}.rs")).is_file() || src.join(module).is_dir(),
            "no module {module} in the engine"
        );
    }
}

/// Whether `text` names the identifier `ident` (not as part of a longer one).
fn names(text: &str, ident: &str) -> bool {
    let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(ident).any(|(at, _)| {
        !part(text[..at].chars().last()) && !part(text[at + ident.len()..].chars().next())
    })
}
