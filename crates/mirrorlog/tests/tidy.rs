//! The workspace's rules, as a test (TigerBeetle's `tidy.zig` is the model). It reads every
//! crate's sources and manifests and prints what breaks each rule:
//!
//! 1. **Layers.** Each crate's top-level modules have an order, lowest first ([`LAYERS`]); a
//!    module imports (`crate::x`) only modules before it, and every module is in the order.
//!    The files of one folder never import each other in a circle. Crates depend downward only:
//!    the engine on none of the others, the broker and the tool on the engine, the bench on the
//!    engine and the broker ([`CRATE_DEPENDENCIES`]).
//! 2. **The engine's internals stay inside it.** No crate's sources use `mirrorlog::internals`,
//!    but the bench's, which measures internal layers against raw baselines ([`INTERNALS_ALLOWED`]).
//! 3. **Files stay short.** A source file holds at most [`FILE_LINES_MAX`] lines before its test
//!    module, but those in [`LONG_FILES_ALLOWED`], each with why.
//! 4. **References resolve.** Nothing cites an issue number, a stop, or a document outside the
//!    repository (its specification and style guide live outside it); every `design.md §Name` a
//!    file cites is a section of `docs/design.md`.
//! 5. **Errors are typed.** In the crates of [`TYPED_ERROR_CRATES`] no function returns
//!    `Result<_, String>`: a caller matches on what went wrong, never on a sentence.
//!
//! Each rule is a function over files in memory, so the `planted_*` tests show each one failing
//! on a planted violation; the last test runs them all on the workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each crate's top-level modules, lowest layer first.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "mirrorlog",
        &[
            "mem",
            "clock",
            "io",
            "format",
            "producer_state",
            "journal",
            "segment",
            "log",
            "api",
            "recovery",
            "shard",
            "engine",
            "mirror",
            "inspect",
        ],
    ),
    (
        "mirrorlog-broker",
        &[
            "test_hooks",
            "logging",
            "metrics",
            "config",
            "storage",
            "acl",
            "net",
            "coordinator",
            "settings",
            "broker",
            "mirror",
            "kafka",
            "admin",
            "cli",
        ],
    ),
    (
        "mirrorlog-bench",
        &[
            "args",
            "measure",
            "baselines",
            "report",
            "svg",
            "setup",
            "wide",
            "fetch",
            "workloads",
            "hot",
            "partitions",
            "compaction",
            "groups",
            "metrics_cost",
            "broker",
            "broker_mirror",
        ],
    ),
    ("mirrorlog-cli", &[]),
];

/// The workspace crates each crate may depend on (normal dependencies).
const CRATE_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("mirrorlog", &[]),
    ("mirrorlog-broker", &["mirrorlog"]),
    ("mirrorlog-cli", &["mirrorlog"]),
    ("mirrorlog-bench", &["mirrorlog", "mirrorlog-broker"]),
];

/// Crates whose sources may use `mirrorlog::internals`, and why.
const INTERNALS_ALLOWED: &[(&str, &str)] = &[(
    "mirrorlog-bench",
    "it measures the engine's internal layers (the partition log, recovery, raw io_uring) \
     against baselines of the same technique",
)];

/// Crates whose errors are types (rule 5). The engine's few private helpers that still
/// describe a failure as a `String` turn it into a typed error before it leaves them, and the
/// bench's reports are text for a person.
const TYPED_ERROR_CRATES: &[&str] = &["mirrorlog-broker", "mirrorlog-cli"];

/// The most lines a source file holds before its test module.
const FILE_LINES_MAX: usize = 800;

/// Source files allowed past [`FILE_LINES_MAX`], and why (none now).
const LONG_FILES_ALLOWED: &[(&str, &str)] = &[];

/// One file: its path from the repository's root, and its text.
type File = (PathBuf, String);

/// The code of `text` without comment lines (a reference in prose is not an import).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
}

/// The `crate::name` paths a line names.
fn crate_paths(line: &str) -> Vec<Vec<&str>> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path: Vec<&str> = rest[..end].split("::").filter(|s| !s.is_empty()).collect();
        out.push(path);
    }
    out
}

/// The top-level module a source file belongs to (`None` for the crate root files).
fn top_module(src_relative: &Path) -> Option<String> {
    let first = src_relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// Rule 1, inside a crate: `files` are its sources, paths relative to its `src/`.
fn layer_violations(crate_name: &str, order: &[&str], files: &[File]) -> Vec<String> {
    let rank = |m: &str| order.iter().position(|x| *x == m);
    let mut out = Vec::new();
    let mut modules = BTreeSet::new();
    for (path, _) in files {
        let Some(top) = top_module(path) else {
            continue;
        };
        if !modules.insert(top.clone()) {
            continue;
        }
        if rank(&top).is_none() {
            out.push(format!(
                "{crate_name}: module `{top}` has no place in the layer order (tests/tidy.rs LAYERS)"
            ));
        }
    }
    for (path, text) in files {
        let Some(top) = top_module(path) else {
            continue;
        };
        let Some(mine) = rank(&top) else { continue };
        for (n, line) in code_lines(text) {
            for p in crate_paths(line) {
                let Some(first) = p.first() else { continue };
                if let Some(theirs) = rank(first) {
                    if theirs > mine {
                        out.push(format!(
                            "{crate_name}/src/{}:{n}: `{top}` imports `{first}`, a higher layer",
                            path.display()
                        ));
                    }
                }
            }
        }
    }
    out.extend(sibling_cycles(crate_name, files));
    out
}

/// Rule 1, inside a folder: the files of one folder never import each other in a circle.
fn sibling_cycles(crate_name: &str, files: &[File]) -> Vec<String> {
    // Module path of each file (`a/b.rs` → [a, b]; `a/mod.rs` → [a]).
    let module_of = |p: &Path| -> Vec<String> {
        let mut parts: Vec<String> = p
            .components()
            .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
            .collect();
        if let Some(last) = parts.pop() {
            let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
            if !matches!(stem.as_str(), "mod" | "lib" | "main") {
                parts.push(stem);
            }
        }
        parts
    };
    // Edges between siblings: file module [.., a] → [.., b] in the same folder.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let all: BTreeSet<Vec<String>> = files.iter().map(|(p, _)| module_of(p)).collect();
    for (path, text) in files {
        let me = module_of(path);
        let is_folder = path.file_name().is_some_and(|n| n == "mod.rs");
        if me.is_empty() || is_folder {
            continue;
        }
        let parent = &me[..me.len() - 1];
        for (_, line) in code_lines(text) {
            let mut targets: Vec<Vec<String>> = crate_paths(line)
                .into_iter()
                .map(|p| p.iter().map(|s| (*s).to_string()).collect())
                .collect();
            let mut rest = line;
            while let Some(at) = rest.find("super::") {
                rest = &rest[at + "super::".len()..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let mut t = parent.to_vec();
                t.push(rest[..end].to_string());
                targets.push(t);
            }
            for t in targets {
                // The sibling named: the target's path cut to one past the parent.
                if t.len() > parent.len() && t[..parent.len()] == *parent {
                    let sibling = t[..=parent.len()].to_vec();
                    if sibling != me && all.contains(&sibling) {
                        edges.entry(me.clone()).or_default().insert(sibling);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            if a < b && edges.get(b).is_some_and(|back| back.contains(a)) {
                out.push(format!(
                    "{crate_name}: `{}` and `{}` import each other (a circle between files of one folder)",
                    a.join("::"),
                    b.join("::")
                ));
            }
        }
    }
    out
}

/// Rule 1, between crates: `manifests` are each crate's name and `Cargo.toml` text.
fn crate_dependency_violations(manifests: &[(String, String)]) -> Vec<String> {
    let crates: Vec<&str> = CRATE_DEPENDENCIES.iter().map(|(c, _)| *c).collect();
    let mut out = Vec::new();
    for (name, text) in manifests {
        let allowed = CRATE_DEPENDENCIES
            .iter()
            .find(|(c, _)| c == name)
            .map_or(&[][..], |(_, d)| *d);
        let mut section = String::new();
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                section = t.to_string();
                continue;
            }
            if section != "[dependencies]" {
                continue;
            }
            let dep = t.split(['=', ' ']).next().unwrap_or_default();
            if crates.contains(&dep) && !allowed.contains(&dep) {
                out.push(format!(
                    "{name}/Cargo.toml: depends on `{dep}`, which is not below it"
                ));
            }
        }
    }
    out
}

/// Rule 2: `files` are one crate's sources.
fn internals_violations(crate_name: &str, files: &[File]) -> Vec<String> {
    if crate_name == "mirrorlog" || INTERNALS_ALLOWED.iter().any(|(c, _)| *c == crate_name) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (path, text) in files {
        for (n, line) in code_lines(text) {
            if line.contains("mirrorlog::internals") {
                out.push(format!(
                    "{crate_name}/src/{}:{n}: uses `mirrorlog::internals` (the engine's public API is `mirrorlog::{{api, engine, format, inspect, mirror}}`)",
                    path.display()
                ));
            }
        }
    }
    out
}

/// The type arguments of every `Result<..>` a line names, split at its top-level commas.
fn result_arguments(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("Result<") {
        let args = &rest[at + "Result<".len()..];
        let (mut depth, mut parts, mut current) = (0usize, Vec::new(), String::new());
        for ch in args.chars() {
            match ch {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => break,
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut current).trim().to_string());
                    continue;
                }
                _ => {}
            }
            current.push(ch);
        }
        parts.push(current.trim().to_string());
        out.push(parts);
        rest = args;
    }
    out
}

/// Rule 5: `files` are one crate's sources.
fn string_error_violations(crate_name: &str, files: &[File]) -> Vec<String> {
    if !TYPED_ERROR_CRATES.contains(&crate_name) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (path, text) in files {
        for (n, line) in code_lines(text) {
            if result_arguments(line)
                .iter()
                .any(|args| args.len() == 2 && args[1] == "String")
            {
                out.push(format!(
                    "{crate_name}/src/{}:{n}: returns `Result<_, String>` (give the error a type)",
                    path.display()
                ));
            }
        }
    }
    out
}

/// Rule 3: `files` are source files, paths from the repository's root.
fn length_violations(files: &[File]) -> Vec<String> {
    files
        .iter()
        .filter_map(|(path, text)| {
            let before_tests = text
                .lines()
                .take_while(|l| !l.starts_with("#[cfg(test)]"))
                .count();
            let allowed = LONG_FILES_ALLOWED
                .iter()
                .any(|(p, _)| Path::new(p) == path.as_path());
            (before_tests > FILE_LINES_MAX && !allowed).then(|| {
                format!(
                    "{}: {before_tests} lines before its tests (at most {FILE_LINES_MAX}): split it by concern, or allow it in LONG_FILES_ALLOWED with why",
                    path.display()
                )
            })
        })
        .collect()
}

/// Rule 4: `files` are any text files, paths from the repository's root; `sections` the
/// headings of `docs/design.md`.
fn reference_violations(files: &[File], sections: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        // History is the changelog's; this file names the patterns it looks for.
        if path.ends_with("CHANGELOG.md") || path.ends_with("tests/tidy.rs") {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let numbered = ["issue ", "issues ", "stop "].into_iter().find(|w| {
                lower.match_indices(w).any(|(at, _)| {
                    let before = lower[..at].chars().last();
                    let after = lower[at + w.len()..].chars().next();
                    !before.is_some_and(char::is_alphanumeric)
                        && after.is_some_and(|c| c.is_ascii_digit())
                })
            });
            if let Some(w) = numbered {
                out.push(format!(
                    "{}:{}: cites an {}number; say what it is, or cite docs/design.md",
                    path.display(),
                    i + 1,
                    w
                ));
            }
            for outside in ["SPEC §", "SPEC.md", "STYLE.md", "../shared/"] {
                if line.contains(outside) {
                    out.push(format!(
                        "{}:{}: cites `{outside}`, a document outside the repository; cite docs/design.md",
                        path.display(),
                        i + 1
                    ));
                }
            }
            let mut rest = line;
            while let Some(at) = rest.find("design.md §") {
                rest = &rest[at + "design.md §".len()..];
                let named = sections
                    .iter()
                    .filter(|s| rest.starts_with(s.as_str()))
                    .max_by_key(|s| s.len());
                if named.is_none() {
                    out.push(format!(
                        "{}:{}: cites design.md §{}…, which is no section of docs/design.md",
                        path.display(),
                        i + 1,
                        rest.chars().take(20).collect::<String>()
                    ));
                }
            }
        }
    }
    out
}

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/mirrorlog is two below the root")
        .to_path_buf()
}

/// Every file under `dir` whose name ends with one of `suffixes`, paths relative to `base`.
fn read_tree(base: &Path, dir: &Path, suffixes: &[&str], out: &mut Vec<File>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || matches!(name, "target" | "fixtures" | "corpus" | "artifacts") {
            continue;
        }
        if p.is_dir() {
            read_tree(base, &p, suffixes, out);
        } else if suffixes.iter().any(|s| name.ends_with(s)) {
            if let Ok(text) = std::fs::read_to_string(&p) {
                out.push((p.strip_prefix(base).unwrap_or(&p).to_path_buf(), text));
            }
        }
    }
}

/// Every rule over the workspace: the violations found.
fn workspace_violations() -> Vec<String> {
    let root = root();
    let mut out = Vec::new();
    let mut manifests = Vec::new();
    let mut all_sources = Vec::new();
    for (crate_name, order) in LAYERS {
        let dir = root.join("crates").join(crate_name);
        let mut files = Vec::new();
        read_tree(&dir.join("src"), &dir.join("src"), &[".rs"], &mut files);
        assert!(!files.is_empty(), "no sources for {crate_name}");
        out.extend(layer_violations(crate_name, order, &files));
        out.extend(internals_violations(crate_name, &files));
        out.extend(string_error_violations(crate_name, &files));
        all_sources.extend(files.into_iter().map(|(p, t)| {
            (
                PathBuf::from("crates").join(crate_name).join("src").join(p),
                t,
            )
        }));
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("a manifest");
        manifests.push(((*crate_name).to_string(), manifest));
    }
    out.extend(crate_dependency_violations(&manifests));
    out.extend(length_violations(&all_sources));
    let design = std::fs::read_to_string(root.join("docs/design.md")).expect("docs/design.md");
    let sections: BTreeSet<String> = design
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::to_string)
        .collect();
    let mut texts = Vec::new();
    for dir in [
        "crates", "docs", "scripts", "testdata", "fuzz", "examples", ".ci",
    ] {
        read_tree(
            &root,
            &root.join(dir),
            &[".rs", ".md", ".sh", ".py", ".toml", ".list", "run"],
            &mut texts,
        );
    }
    for file in ["README.md", "Cargo.toml"] {
        if let Ok(text) = std::fs::read_to_string(root.join(file)) {
            texts.push((PathBuf::from(file), text));
        }
    }
    out.extend(reference_violations(&texts, &sections));
    out
}

#[test]
fn the_workspace_keeps_every_rule() {
    let violations = workspace_violations();
    for v in &violations {
        eprintln!("tidy: {v}");
    }
    assert!(
        violations.is_empty(),
        "{} rule(s) broken (above)",
        violations.len()
    );
}

fn file(path: &str, text: &str) -> File {
    (PathBuf::from(path), text.to_string())
}

#[test]
fn planted_an_upward_import_and_a_module_out_of_the_order_are_found() {
    let files = [
        file("format/mod.rs", "use crate::log::PartitionLog;\n"),
        file("log/mod.rs", "use crate::format::Offset;\n"),
        file("newcomer.rs", "pub fn f() {}\n"),
    ];
    let v = layer_violations("mirrorlog", &["format", "log"], &files);
    assert!(
        v.iter()
            .any(|m| m.contains("format/mod.rs:1") && m.contains("`log`, a higher layer")),
        "{v:?}"
    );
    assert!(
        v.iter().any(|m| m.contains("`newcomer` has no place")),
        "{v:?}"
    );
    // A mention in a comment is no import.
    let fine = [
        file("format/mod.rs", "// see crate::log\n"),
        file("log/mod.rs", ""),
    ];
    assert!(layer_violations("mirrorlog", &["format", "log"], &fine).is_empty());
}

#[test]
fn planted_a_circle_between_files_of_one_folder_is_found() {
    let files = [
        file("mirror/mod.rs", "mod link;\nmod pump;\n"),
        file("mirror/link.rs", "use super::pump::Pump;\n"),
        file("mirror/pump.rs", "use crate::mirror::link::MirrorLink;\n"),
    ];
    let v = layer_violations("mirrorlog", &["mirror"], &files);
    assert!(
        v.iter()
            .any(|m| m.contains("mirror::link") && m.contains("each other")),
        "{v:?}"
    );
}

#[test]
fn planted_a_dependency_on_a_higher_crate_is_found() {
    let v = crate_dependency_violations(&[(
        "mirrorlog".to_string(),
        "[dependencies]\nmirrorlog-broker = { path = \"../mirrorlog-broker\" }\n".to_string(),
    )]);
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn planted_an_internals_use_outside_the_engine_is_found() {
    let files = [file(
        "kafka/errors.rs",
        "use mirrorlog::internals::log::LogError;\n",
    )];
    assert_eq!(internals_violations("mirrorlog-broker", &files).len(), 1);
    assert!(internals_violations("mirrorlog-bench", &files).is_empty());
}

#[test]
fn planted_a_string_error_is_found_and_a_map_of_strings_is_not() {
    let files = [
        file(
            "net/wire.rs",
            "pub fn decode(b: &[u8]) -> Result<Frame, String> {\n",
        ),
        file(
            "config/x.rs",
            "fn f() -> Result<BTreeMap<String, String>, ConfigError> {\n",
        ),
        file(
            "a.rs",
            "type R = std::result::Result<(u8, String), Error>;\n",
        ),
    ];
    let v = string_error_violations("mirrorlog-broker", &files);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("net/wire.rs:1"), "{v:?}");
    assert!(string_error_violations("mirrorlog-bench", &files).is_empty());
}

#[test]
fn planted_a_long_file_is_found_and_its_tests_do_not_count() {
    let long = "fn f() {}\n".repeat(FILE_LINES_MAX + 1);
    let v = length_violations(&[file("crates/x/src/long.rs", &long)]);
    assert_eq!(v.len(), 1, "{v:?}");
    let short_with_tests = format!(
        "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        "fn f() {}\n".repeat(10),
        "fn t() {}\n".repeat(FILE_LINES_MAX)
    );
    assert!(length_violations(&[file("crates/x/src/ok.rs", &short_with_tests)]).is_empty());
}

#[test]
fn planted_references_to_issues_and_outside_documents_are_found() {
    let sections: BTreeSet<String> = ["Mirroring".to_string()].into();
    let files = [
        file("a.rs", "// The journal (issue 30): one file per shard.\n"),
        file("b.rs", "// As SPEC §3 says.\n"),
        file("c.md", "Landed at stop 45.\n"),
        file(
            "d.rs",
            "// design.md §Mirroring holds; design.md §Nowhere does not.\n",
        ),
        file("CHANGELOG.md", "Issue 30 landed.\n"),
    ];
    let v = reference_violations(&files, &sections);
    assert!(v.iter().any(|m| m.starts_with("a.rs:1")), "{v:?}");
    assert!(v.iter().any(|m| m.starts_with("b.rs:1")), "{v:?}");
    assert!(v.iter().any(|m| m.starts_with("c.md:1")), "{v:?}");
    assert!(
        v.iter()
            .any(|m| m.starts_with("d.rs:1") && m.contains("Nowhere")),
        "{v:?}"
    );
    assert_eq!(v.len(), 4, "{v:?}");
}
