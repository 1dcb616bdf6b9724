//! No import cycle between the files of a crate.
//!
//! A file that imports from another depends on it; a crate's files can
//! only be learned in an order while that graph has no cycle (between the
//! crates, Cargo itself refuses one). This test reads every crate's
//! sources, builds the graph and fails naming each cycle.
//!
//! How a file's dependencies are read:
//! - Every `lib.rs` and `main.rs` of the repository is a crate root, and so
//!   is every other `.rs` file no root reaches (examples, benches, fixture
//!   binaries). The module tree is followed from each root through
//!   `mod name;` declarations, so `crate::` means what rustc means.
//! - A private `use` of an item and every `crate::…`, `super::…`, `self::…`
//!   or child-module path in code is an edge to the file that defines the
//!   named item. A path whose first segment is a name the file imported
//!   (`use crate::runner;` then `runner::Call`) is read through the import.
//!   Inline modules (`mod tests { .. }`) are part of their file: a file's
//!   tests count.
//! - A path through a re-export or an import of another module is followed
//!   to where the item is defined.
//! - A `pub use` (of any visibility) is a facade, not a dependency: a parent
//!   module that re-exports its children's API does not depend on them by
//!   doing so. It is an edge when the file itself also uses the name.
//! - Comments and string literals are ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One file module: what it declares, defines and imports.
#[derive(Debug, Default)]
struct FileModule {
    file: PathBuf,
    /// Child modules declared with `mod name;` (file modules).
    children: BTreeSet<String>,
    /// Names the file's top scope imports (`use`, public or not): name ->
    /// absolute path.
    imports: BTreeMap<String, Vec<String>>,
    /// Modules the file's top scope glob-imports.
    globs: Vec<Vec<String>>,
    /// Names the file's top scope defines (items, inline modules).
    items: BTreeSet<String>,
    /// Every `use` of the file, in any scope: absolute path, exported name
    /// (`None` for a glob), whether it is a `pub use`.
    use_paths: Vec<(Vec<String>, Option<String>, bool)>,
    /// Absolute paths written in code.
    code_paths: Vec<Vec<String>>,
    /// Identifiers in code outside `use` and `mod` declarations.
    code_idents: BTreeSet<String>,
}

type Tree = BTreeMap<Vec<String>, FileModule>;

/// A `use` as read: the module it is written in, the path as written, the
/// imported name (`None` for a glob), whether it is a `pub use`.
type UseFound = (Vec<String>, Vec<String>, Option<String>, bool);

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let tests = crate::support::tests_dir();
    let root = tests.parent().unwrap();
    let mut report = String::new();
    for tree in crate_trees(root) {
        for cycle in cycles(&tree) {
            let shown = |m: &Vec<String>| {
                tree[m]
                    .file
                    .strip_prefix(root)
                    .unwrap()
                    .display()
                    .to_string()
            };
            report.push_str(&format!(
                "{}\n",
                cycle.iter().map(shown).collect::<Vec<_>>().join(", ")
            ));
            for from in &cycle {
                for path in edges(&tree, &tree[from]) {
                    if let Some(to) = resolve(&tree, &path, 0).map(|(to, _)| to)
                        && &to != from
                        && cycle.contains(&to)
                    {
                        report.push_str(&format!(
                            "    {} uses {} ({})\n",
                            shown(from),
                            shown(&to),
                            path.join("::")
                        ));
                    }
                }
            }
        }
    }
    assert!(
        report.is_empty(),
        "files that import each other, each group with the uses that close it (move what both sides need into a file below both):\n{report}"
    );
}

/// The module tree of every crate in the repository (see the header).
fn crate_trees(root: &Path) -> Vec<Tree> {
    fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    collect(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    collect(root, &mut files);
    let is_root = |f: &PathBuf| f.ends_with("lib.rs") || f.ends_with("main.rs");
    let (named, others): (Vec<PathBuf>, Vec<PathBuf>) = files.into_iter().partition(is_root);
    let mut covered = BTreeSet::new();
    let mut trees = Vec::new();
    for file in named.iter().chain(&others) {
        if !is_root(file) && covered.contains(file) {
            continue;
        }
        let tree = read_tree(file);
        covered.extend(tree.values().map(|m| m.file.clone()));
        trees.push(tree);
    }
    assert!(
        trees.len() > 10,
        "the reader found only {} crates under {}",
        trees.len(),
        root.display()
    );
    trees
}

/// The reader itself: it must see the cycles it exists to catch.
#[test]
fn the_reader_sees_a_cycle_through_use_super_and_a_reexport() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\npub use b::Thing; // \"crate::a\" in a string\n",
    );
    write("a.rs", "use crate::Thing;\npub struct A;\n");
    write(
        "b.rs",
        "pub struct Thing;\nfn f() { let _ = super::c::g(); }\n",
    );
    write("c.rs", "pub fn g() { let _ = crate::a::A; }\n");
    let tree = read_tree(&dir.path().join("lib.rs"));
    let found = cycles(&tree);
    assert_eq!(found.len(), 1, "{found:?}");
    let names: BTreeSet<String> = found[0].iter().map(|m| m.join("::")).collect();
    assert_eq!(names, BTreeSet::from(["a".into(), "b".into(), "c".into()]));

    // The same files without the edge back from `a` have no cycle.
    write("a.rs", "pub struct A;\n// use crate::Thing;\n");
    assert!(cycles(&read_tree(&dir.path().join("lib.rs"))).is_empty());
}

/// A facade is no dependency, and a name used through an imported module
/// belongs to the file that defines it; a re-export the file itself uses is
/// a dependency.
#[test]
fn the_reader_follows_imported_modules_and_sees_a_used_reexport() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod m;\nmod user;\n");
    write(
        "m/mod.rs",
        "mod x;\npub use x::X;\npub fn helper() { crate::user::u(); }\n",
    );
    write("m/x.rs", "pub struct X;\n");
    write("user.rs", "use crate::m;\npub fn u() { let _ = m::X; }\n");
    let lib = dir.path().join("lib.rs");
    assert!(
        cycles(&read_tree(&lib)).is_empty(),
        "{:?}",
        cycles(&read_tree(&lib))
    );

    // `m` now uses `X` itself, and `x.rs` calls back into `m`.
    write(
        "m/mod.rs",
        "mod x;\npub use x::X;\npub fn make() -> X { X }\n",
    );
    write(
        "m/x.rs",
        "pub struct X;\npub fn back() { super::make(); }\n",
    );
    let found = cycles(&read_tree(&lib));
    assert_eq!(found.len(), 1, "{found:?}");
    let names: BTreeSet<String> = found[0].iter().map(|m| m.join("::")).collect();
    assert_eq!(names, BTreeSet::from(["m".into(), "m::x".into()]));
}

fn read_tree(crate_root: &Path) -> Tree {
    let mut tree = Tree::new();
    read_module(&mut tree, Vec::new(), crate_root, true);
    tree
}

fn read_module(tree: &mut Tree, path: Vec<String>, file: &Path, owns_dir: bool) {
    let text = strip_comments_and_strings(&std::fs::read_to_string(file).unwrap());
    let dir = if owns_dir {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    let mut module = FileModule {
        file: file.to_path_buf(),
        ..FileModule::default()
    };
    let tokens = tokenize(&text);
    // Inline modules (`mod tests { .. }`) are part of this file, but
    // `super::` inside one names this file's module.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let here = |inline: &[(String, usize)]| {
        let mut here = path.clone();
        here.extend(inline.iter().map(|(name, _)| name.clone()));
        here
    };
    // (module the path is written in, the path as written, the imported
    // name or `None` for a glob, whether it is a `pub use`).
    let mut uses: Vec<UseFound> = Vec::new();
    let mut code: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let top = inline.is_empty() && depth == 0;
        match tokens[i].as_str() {
            "{" => {
                depth += 1;
                i += 1;
            }
            "}" => {
                if inline.last().is_some_and(|(_, open)| *open == depth) {
                    inline.pop();
                }
                depth -= 1;
                i += 1;
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                if top {
                    module.items.insert(tokens[i + 1].clone());
                }
                depth += 1;
                inline.push((tokens[i + 1].clone(), depth));
                i += 3;
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == ";") => {
                let name = tokens[i + 1].clone();
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                let mut child_path = path.clone();
                child_path.push(name.clone());
                if flat.exists() {
                    read_module(tree, child_path, &flat, false);
                } else if nested.exists() {
                    read_module(tree, child_path, &nested, true);
                }
                module.children.insert(name);
                i += 3;
            }
            // Not `impl Trait + use<'a>` (precise capturing).
            "use" if tokens.get(i + 1).is_none_or(|t| t != "<") => {
                let public = i > 0 && (tokens[i - 1] == "pub" || tokens[i - 1] == ")");
                let end = tokens[i..]
                    .iter()
                    .position(|t| t == ";")
                    .map_or(tokens.len(), |p| i + p);
                for (alias, relative) in use_tree(&tokens[i + 1..end]) {
                    let name = match alias {
                        Some(glob) if glob == "*" => None,
                        Some(alias) => Some(alias),
                        None => relative.last().cloned(),
                    };
                    uses.push((here(&inline), relative, name, public));
                }
                i = end + 1;
            }
            "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                if top && tokens.get(i + 1).is_some_and(|t| is_ident(t)) =>
            {
                module.items.insert(tokens[i + 1].clone());
                i += 1;
            }
            "macro_rules" if top && tokens.get(i + 2).is_some_and(|t| is_ident(t)) => {
                module.items.insert(tokens[i + 2].clone());
                i += 1;
            }
            token
                if is_ident(token)
                    && tokens.get(i + 1).is_some_and(|t| t == "::")
                    && (i == 0 || tokens[i - 1] != "::") =>
            {
                let mut relative = Vec::new();
                let mut j = i;
                while j < tokens.len() && is_ident(&tokens[j]) {
                    relative.push(tokens[j].clone());
                    if tokens.get(j + 1).is_some_and(|t| t == "::") {
                        j += 2;
                    } else {
                        break;
                    }
                }
                module.code_idents.extend(relative.iter().cloned());
                code.push((here(&inline), relative));
                i = j + 1;
            }
            token => {
                if is_ident(token) {
                    module.code_idents.insert(token.to_owned());
                }
                i += 1;
            }
        }
    }
    // A path starts at `crate`, `super` or `self`, at a child module, or at
    // a name a `use` of this file brought in (edition 2018 paths); anything
    // else names another crate. Imports may start at earlier imports, so
    // they are read until nothing new is learned.
    let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let absolute_in =
        |aliases: &BTreeMap<String, Vec<String>>, written_in: &[String], relative: &[String]| {
            match relative.first().map(String::as_str) {
                Some("crate" | "super" | "self") => absolute(written_in, relative),
                Some(first) if module.children.contains(first) => {
                    Some(path.iter().chain(relative).cloned().collect())
                }
                Some(first) => aliases
                    .get(first)
                    .map(|target| target.iter().chain(&relative[1..]).cloned().collect()),
                None => None,
            }
        };
    loop {
        let before = aliases.len();
        for (written_in, relative, name, _) in &uses {
            if let (Some(name), Some(absolute)) =
                (name, absolute_in(&aliases, written_in, relative))
                && !aliases.contains_key(name)
            {
                aliases.insert(name.clone(), absolute);
            }
        }
        if aliases.len() == before {
            break;
        }
    }
    for (written_in, relative, name, public) in &uses {
        let Some(absolute) = absolute_in(&aliases, written_in, relative) else {
            continue;
        };
        if *written_in == path {
            match name {
                Some(name) => {
                    module.imports.insert(name.clone(), absolute.clone());
                }
                None => module.globs.push(absolute.clone()),
            }
        }
        module.use_paths.push((absolute, name.clone(), *public));
    }
    for (written_in, relative) in &code {
        if let Some(absolute) = absolute_in(&aliases, written_in, relative) {
            module.code_paths.push(absolute);
        }
    }
    tree.insert(path, module);
}

/// What `module` depends on, as absolute paths: its private `use`s of
/// items and globs, a `pub use` whose name the file itself uses, and every
/// path in code. A `use` of a module is no edge by itself: the paths
/// through it in code are.
fn edges(tree: &Tree, module: &FileModule) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (absolute, name, public) in &module.use_paths {
        let used_here = match name {
            Some(name) => !public || module.code_idents.contains(name),
            None => !public,
        };
        let names_a_module = name.is_some() && resolve(tree, absolute, 0).is_some_and(|(_, m)| m);
        if used_here && !names_a_module {
            out.push(absolute.clone());
        }
    }
    out.extend(module.code_paths.iter().cloned());
    out
}

/// The paths a use tree names, each with its `as` alias, if any.
fn use_tree(tokens: &[String]) -> Vec<(Option<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    walk_use(tokens, &mut i, &[], &mut out);
    out
}

fn walk_use(
    tokens: &[String],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    let mut path = prefix.to_vec();
    while *i < tokens.len() {
        let token = &tokens[*i];
        match token.as_str() {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                loop {
                    walk_use(tokens, i, &path, out);
                    match tokens.get(*i).map(String::as_str) {
                        Some(",") => *i += 1,
                        Some("}") => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    if tokens.get(*i).is_some_and(|t| t == "}") {
                        *i += 1;
                        return;
                    }
                }
            }
            "," | "}" => break,
            "as" => {
                out.push((tokens.get(*i + 1).cloned(), path.clone()));
                *i += 2;
                return;
            }
            "*" => {
                *i += 1;
                out.push((Some("*".into()), path.clone()));
                return;
            }
            _ => {
                path.push(token.clone());
                *i += 1;
            }
        }
    }
    if path.len() > prefix.len() {
        let path = if path.last().is_some_and(|p| p == "self") {
            path[..path.len() - 1].to_vec()
        } else {
            path
        };
        out.push((None, path));
    }
}

/// `relative` (starting with `crate`, `super` or `self`) from module `here`
/// as a path from the crate root; `None` for paths into other crates.
fn absolute(here: &[String], relative: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = relative;
    match relative.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &relative[1..];
        }
        Some("super") | Some("self") => {
            base = here.to_vec();
            while let Some(step) = rest.first() {
                match step.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file module that defines what `path` names, following re-exports
/// and imports, and whether `path` names that module itself.
fn resolve(tree: &Tree, path: &[String], depth: usize) -> Option<(Vec<String>, bool)> {
    if depth > 16 {
        return None;
    }
    let mut module: Vec<String> = Vec::new();
    for (at, segment) in path.iter().enumerate() {
        let current = tree.get(&module)?;
        if current.children.contains(segment) {
            module.push(segment.clone());
            continue;
        }
        let through = |target: &[String]| -> Vec<String> {
            target.iter().chain(&path[at + 1..]).cloned().collect()
        };
        if let Some(target) = current.imports.get(segment)
            && target.as_slice() != &path[..=at]
        {
            return resolve(tree, &through(target), depth + 1);
        }
        if !current.items.contains(segment) {
            for glob in &current.globs {
                if let Some((target, true)) = resolve(tree, glob, depth + 1)
                    && let Some(defining) = tree.get(&target)
                    && (defining.children.contains(segment)
                        || defining.imports.contains_key(segment)
                        || defining.items.contains(segment))
                {
                    let mut followed = glob.clone();
                    followed.push(segment.clone());
                    return resolve(tree, &through(&followed), depth + 1);
                }
            }
        }
        return Some((module, false));
    }
    Some((module, true))
}

/// Every strongly connected component of more than one file (Tarjan).
fn cycles(tree: &Tree) -> Vec<Vec<Vec<String>>> {
    let edges: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> = tree
        .iter()
        .map(|(name, module)| {
            let targets = edges(tree, module)
                .into_iter()
                .filter_map(|path| resolve(tree, &path, 0).map(|(target, _)| target))
                .filter(|target| target != name)
                .collect();
            (name, targets)
        })
        .collect();
    let names: Vec<&Vec<String>> = tree.keys().collect();
    let index_of: BTreeMap<&Vec<String>, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adjacency: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            edges[n]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();

    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adjacency: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &adjacency[v] {
            match s.index[w] {
                None => {
                    visit(w, adjacency, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(index) if s.on_stack[w] => s.low[v] = s.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        index: vec![None; names.len()],
        low: vec![0; names.len()],
        on_stack: vec![false; names.len()],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..names.len() {
        if state.index[v].is_none() {
            visit(v, &adjacency, &mut state);
        }
    }
    state
        .found
        .into_iter()
        .map(|mut c| {
            c.sort_unstable();
            c.into_iter().map(|i| names[i].clone()).collect()
        })
        .collect()
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Identifiers, `::` and single punctuation characters.
fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".into());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}

/// `text` with comments, string and char literals blanked out (raw strings
/// included), so a path inside them is not read as an import.
fn strip_comments_and_strings(text: &str) -> String {
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
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('#') || next == Some('"'))
            // `r"…"`, and `br"…"` too.
            && (!prev_is_ident(&chars, i) || (chars[i - 1] == 'b' && !prev_is_ident(&chars, i - 1)))
        {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && is_char_literal(&chars, i) {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// A `'` that opens a char literal rather than a lifetime or label.
fn is_char_literal(chars: &[char], i: usize) -> bool {
    matches!(
        (chars.get(i + 1), chars.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}
