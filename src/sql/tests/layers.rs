//! The SQL crate's layers only point down (catalog < engine < planner < pg < frontend), no
//! crate of the workspace has an import cycle between its modules, and no source file is over
//! 800 lines. Parses `crate::` and `super::` paths in every source file (test modules
//! excluded), as `../shared/tools` does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("source dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module path of a file under `src/`: `frontend/ddl.rs` → `frontend::ddl`, `pg/mod.rs` → `pg`.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Paths named after `prefix` (`crate::a::b`, or `crate::{a, b::c}`).
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(body) = rest.strip_prefix('{') {
            let end = body.find('}').unwrap_or(body.len());
            for part in body[..end].split(',') {
                out.push(part.trim().split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect());
            }
            continue;
        }
        let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        out.push(path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect());
    }
    out
}

/// Edges between the modules of one crate.
fn edges(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files.iter().map(|f| (module_of(src, f), f.clone())).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, path) in &modules {
        let text = std::fs::read_to_string(path).expect("readable source");
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        // `super::` in `a/b.rs` (module a::b) and in `a/b/mod.rs` alike names module `a`.
        let parent: Module = m[..m.len().saturating_sub(1)].to_vec();
        let mut refs = paths_after(text, "crate::");
        for p in paths_after(text, "super::") {
            let mut r = parent.clone();
            r.extend(p);
            refs.push(r);
        }
        let out = edges.entry(m.clone()).or_default();
        for r in refs {
            for k in (1..=r.len()).rev() {
                let target = r[..k].to_vec();
                if modules.contains_key(&target) {
                    let ancestor = target.len() < m.len() && m[..target.len()] == target[..];
                    if target != *m && !ancestor {
                        out.insert(target);
                    }
                    break;
                }
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module.
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        out: Vec<Vec<Module>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &Module) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on.insert(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(&w);
                    let done = &w == v;
                    comp.push(w);
                    if done {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_crate_has_a_module_cycle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for e in std::fs::read_dir(&crates).expect("src dir").flatten() {
        let src = e.path().join("src");
        if src.is_dir() {
            for c in cycles(&edges(&src)) {
                let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
                found.push(format!("{}: {}", e.file_name().to_string_lossy(), names.join(", ")));
            }
        }
    }
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

/// Longest a source file may be (issue 8: split a file by concern before it grows past this).
const MAX_FILE_LINES: usize = 800;

#[test]
fn no_source_file_is_over_800_lines() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).expect("source file").lines().count();
            (n > MAX_FILE_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(!files.is_empty(), "no source files found under {}", crates.display());
    assert!(long.is_empty(), "files over {MAX_FILE_LINES} lines:\n{}", long.join("\n"));
}

#[test]
fn sql_layers_only_point_down() {
    const LAYERS: [&str; 5] = ["catalog", "engine", "planner", "pg", "frontend"];
    let rank = |m: &Module| m.first().and_then(|top| LAYERS.iter().position(|l| l == top));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut upward = Vec::new();
    for (from, targets) in edges(&src) {
        let Some(rf) = rank(&from) else { continue };
        for to in targets {
            if rank(&to).is_some_and(|rt| rt > rf) {
                upward.push(format!("{} -> {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up a layer:\n{}", upward.join("\n"));
}

#[test]
fn the_checker_sees_paths_in_braces_and_after_super() {
    let p = paths_after("use crate::{a::b, c};\nlet x = super::d::e();", "crate::");
    assert_eq!(p, vec![vec!["a".to_string(), "b".to_string()], vec!["c".to_string()]]);
    assert_eq!(paths_after("x = super::d::e()", "super::"), vec![vec!["d".to_string(), "e".to_string()]]);
}
