//! The library's module-import rule, read from the source files (no
//! servers), so that CI fails when the layout drifts:
//!
//! 1. `core` is API-neutral: it imports no family (`obc`, `cosi`), not the
//!    composition (`controller`) and not the test kit (`conformance`).
//! 2. The families do not import each other nor the composition, which
//!    imports them; the test kit uses `core` and the public API (what the
//!    crate root re-exports), no family or controller internals.
//! 3. Inside the crate, paths are real (`crate::core::provisioner::X`), never
//!    an alias the crate root re-exports for users (`crate::Provisioner`).
//! 4. No import circles between files, in the library and in the sample.
//!
//! The scanner is `obc_tests::layout` (what counts as an import is
//! described there); the last tests here feed it small file sets to show
//! that each check can fail and that what must not count does not.

use std::path::Path;

use obc_tests::layout::{Circle, Kind, Reference, Tree};

const LIB: &str = "lib-provisioner/src";
const SAMPLE: &str = "sample-provisioner/src";

#[test]
fn core_imports_no_family_composition_or_kit() {
    fail_on(
        &core_imports(&read(LIB)),
        "lib-provisioner/src/core imports from crate::obc, crate::cosi, crate::controller \
         or crate::conformance",
        "core is what the families build on: move what the core file needs into core \
         (an API-neutral type, function or trait the family implements), or move the code \
         that needs the family into that family",
    );
}

#[test]
fn families_import_neither_each_other_nor_the_composition() {
    fail_on(
        &family_imports(&read(LIB)),
        "a family imports the other family (crate::obc <-> crate::cosi) or the composition \
         (crate::controller)",
        "move what both families need into crate::core; the wiring that needs both families \
         or the builder belongs to crate::controller, which imports the families, never the \
         reverse",
    );
}

#[test]
fn conformance_uses_core_and_the_public_api_only() {
    fail_on(
        &conformance_imports(&read(LIB)),
        "lib-provisioner/src/conformance uses crate internals beyond crate::core and the \
         public API (what lib.rs re-exports, such as crate::obc::api and the controller's \
         DEFAULT_PROVISIONER_TIMEOUT)",
        "the kit tests a provisioner through its public contract: import from crate::core, \
         or the item by a path lib.rs re-exports; no crate::cosi, no other crate::obc \
         module, no crate::controller module or crate-private item",
    );
}

#[test]
fn no_crate_root_aliases_inside_the_crate() {
    fail_on(
        &root_aliases(&read(LIB)),
        "a module uses a crate-root alias (crate::X where X is not core, obc, cosi, \
         controller or conformance)",
        "write the real path: crate::Provisioner -> crate::core::provisioner::Provisioner, \
         crate::api -> crate::obc::api, crate::Error -> crate::core::error::Error; lib.rs \
         re-exports the public API for users of the library only",
    );
}

#[test]
fn no_import_circles_in_the_library() {
    fail_on_circles(&read(LIB));
}

#[test]
fn no_import_circles_in_the_sample() {
    fail_on_circles(&read(SAMPLE));
}

fn read(src: &str) -> Tree {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace");
    Tree::read(workspace, src).unwrap_or_else(|e| panic!("reading {src}: {e}"))
}

/// Rule 1.
fn core_imports(tree: &Tree) -> Vec<&Reference> {
    imports_into(tree, "core", &["obc", "cosi", "controller", "conformance"])
}

/// Rule 2, the families.
fn family_imports(tree: &Tree) -> Vec<&Reference> {
    let mut found = imports_into(tree, "obc", &["cosi", "controller"]);
    found.extend(imports_into(tree, "cosi", &["obc", "controller"]));
    found
}

/// Rule 2, the test kit: its own modules, `crate::core`, and what the
/// crate root re-exports (by any path that names the re-exported item).
fn conformance_imports(tree: &Tree) -> Vec<&Reference> {
    let public: Vec<&Vec<String>> = tree
        .refs
        .iter()
        .filter(|r| r.from.is_empty() && r.kind == Kind::ReExport)
        .map(|r| &r.path)
        .collect();
    let allowed = |r: &Reference| {
        matches!(head(r), Some("conformance" | "core"))
            || public.iter().any(|p| r.path.starts_with(p))
    };
    tree.refs
        .iter()
        .filter(|r| in_top(r, "conformance") && !allowed(r))
        .collect()
}

/// Rule 3: qualified paths from modules below the root whose first
/// segment from the root is not a top-level module.
fn root_aliases(tree: &Tree) -> Vec<&Reference> {
    let top = tree.top_level();
    tree.refs
        .iter()
        .filter(|r| !r.from.is_empty() && r.is_qualified())
        .filter(|r| !head(r).is_some_and(|h| top.contains(h)))
        .collect()
}

/// The references from files under top-level module `top` to paths under
/// one of `forbidden` (re-exports and tests included).
fn imports_into<'a>(tree: &'a Tree, top: &str, forbidden: &[&str]) -> Vec<&'a Reference> {
    tree.refs
        .iter()
        .filter(|r| in_top(r, top) && head(r).is_some_and(|h| forbidden.contains(&h)))
        .collect()
}

fn in_top(r: &Reference, top: &str) -> bool {
    r.from.first().is_some_and(|m| m == top)
}

/// The first segment of the reference's path from the crate root.
fn head(r: &Reference) -> Option<&str> {
    r.path.first().map(String::as_str)
}

/// Fails listing each offending line once.
fn fail_on(found: &[&Reference], what: &str, fix: &str) {
    let mut found = found.to_vec();
    found.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    found.dedup_by(|a, b| (&a.file, a.line) == (&b.file, b.line));
    let lines: Vec<String> = found
        .iter()
        .map(|r| format!("  {}", r.location()))
        .collect();
    assert!(
        lines.is_empty(),
        "{what}: {} line(s)\n{}\nFix: {fix}.",
        lines.len(),
        lines.join("\n")
    );
}

fn fail_on_circles(tree: &Tree) {
    let circles = tree.circles();
    let shown: Vec<String> = circles.iter().map(|c| show_circle(tree, c)).collect();
    assert!(
        circles.is_empty(),
        "{} import circle(s) between files (each edge with one import line that makes it):\n\
         {}\nFix: break each circle by removing one of its edges: move the items one file \
         takes from the other into the file that needs them, or into a module both import \
         (for a parent and its child, into the child), so that imports point one way. \
         `pub use` re-exports and a parent's bare `child::X` paths are not edges.",
        circles.len(),
        shown.join("\n")
    );
}

fn show_circle(tree: &Tree, circle: &Circle) -> String {
    let files: Vec<String> = circle.modules.iter().map(|m| tree.file_of(m)).collect();
    let mut out = format!("circle: {}", files.join(", "));
    for (_, to, r) in &circle.edges {
        out += &format!(
            "\n  {}:{} -> {}: {}",
            r.file,
            r.line,
            tree.file_of(to),
            r.text
        );
    }
    out
}

/// The checks on small file sets: each can fail, and what must not count
/// does not.
mod checker {
    use obc_tests::layout::{Kind, Module, Tree, name};

    use super::{conformance_imports, core_imports, family_imports, root_aliases};

    fn tree(files: &[(&str, &str)]) -> Tree {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(path, text)| (path.to_string(), text.to_string()))
            .collect();
        Tree::parse("src", &files)
    }

    fn module(path: &str) -> Module {
        path.split('/').map(str::to_owned).collect()
    }

    fn circles(tree: &Tree) -> Vec<Vec<String>> {
        let circles = tree.circles();
        circles
            .iter()
            .map(|c| c.modules.iter().map(name).collect())
            .collect()
    }

    /// The lines of the found references, as `file:line`.
    fn lines(found: &[&obc_tests::layout::Reference]) -> Vec<String> {
        found
            .iter()
            .map(|r| format!("{}:{}", r.file, r.line))
            .collect()
    }

    #[test]
    fn a_two_file_circle_is_found_with_its_lines() {
        let t = tree(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            ("b.rs", "pub struct B;\n\nfn f(_: super::a::A) {}\n"),
        ]);
        let found = t.circles();
        assert_eq!(circles(&t), [["a", "b"]]);
        let edges: Vec<String> = found[0]
            .edges
            .iter()
            .map(|(from, to, r)| format!("{}->{} {}", name(from), name(to), r.location()))
            .collect();
        assert_eq!(
            edges,
            [
                "a->b src/a.rs:1: use crate::b::B;",
                "b->a src/b.rs:3: fn f(_: super::a::A) {}",
            ]
        );
    }

    #[test]
    fn a_circle_through_three_files_is_one_circle() {
        let t = tree(&[
            ("lib.rs", ""),
            ("a.rs", "use crate::b::B;"),
            ("b.rs", "use crate::c::C;"),
            ("c.rs", "use crate::a::A;"),
            ("d.rs", "use crate::a::A;"),
        ]);
        assert_eq!(circles(&t), [["a", "b", "c"]]);
        assert_eq!(t.circles()[0].edges.len(), 3);
    }

    #[test]
    fn core_importing_a_family_is_found() {
        let t = tree(&[
            ("lib.rs", ""),
            ("core/mod.rs", ""),
            (
                "core/calls.rs",
                "use crate::core::names;\nuse crate::obc::api::ReclaimPolicy;\n\
                 fn f() { super::super::controller::run() }\n\
                 pub use crate::cosi::CosiOptions;\n",
            ),
            ("obc/mod.rs", ""),
            ("obc/api.rs", ""),
        ]);
        assert_eq!(
            lines(&core_imports(&t)),
            [
                "src/core/calls.rs:2",
                "src/core/calls.rs:3",
                "src/core/calls.rs:4"
            ]
        );
    }

    #[test]
    fn families_importing_each_other_or_the_composition_are_found() {
        let t = tree(&[
            ("lib.rs", ""),
            ("obc/mod.rs", "use crate::core::x;\nuse crate::cosi::Y;\n"),
            ("cosi/mod.rs", "fn f() { crate::controller::gate::g() }\n"),
            ("controller.rs", "use crate::{cosi, obc};\n"),
        ]);
        assert_eq!(
            lines(&family_imports(&t)),
            ["src/obc/mod.rs:2", "src/cosi/mod.rs:1"]
        );
    }

    #[test]
    fn conformance_may_use_core_and_what_the_root_re_exports() {
        let t = tree(&[
            (
                "lib.rs",
                "pub mod controller;\npub use crate::obc::api;\n\
                 pub use controller::{ControllerBuilder, DEFAULT_TIMEOUT};\n",
            ),
            ("controller.rs", "mod gate;\n"),
            ("controller/gate.rs", ""),
            ("obc/mod.rs", ""),
            ("obc/api.rs", ""),
            (
                "conformance/kit.rs",
                "use super::ctx::Ctx;\nuse crate::core::names;\n\
                 use crate::obc::api::ReclaimPolicy;\nuse crate::controller::DEFAULT_TIMEOUT;\n\
                 use crate::controller::gate::gated;\nuse crate::obc::reconcile::Plan;\n\
                 use crate::cosi::CosiOptions;\n",
            ),
        ]);
        assert_eq!(
            lines(&conformance_imports(&t)),
            [
                "src/conformance/kit.rs:5",
                "src/conformance/kit.rs:6",
                "src/conformance/kit.rs:7"
            ]
        );
    }

    #[test]
    fn a_crate_root_alias_is_found_but_not_in_comments() {
        let t = tree(&[
            ("lib.rs", "pub use crate::core::provisioner::Provisioner;\n"),
            ("core/mod.rs", ""),
            (
                "core/provisioner.rs",
                "//! See [`crate::Provisioner`].\n\
                 use crate::core::error::Error;\n\
                 use crate::Provisioner;\n\
                 /* crate::api::X */\n\
                 /// Links [`crate::Error`].\n\
                 fn f() -> crate::api::Claim { todo!() }\n\
                 use crate::{obc::api, names};\n",
            ),
            ("obc/mod.rs", "use super::Error;\n"),
        ]);
        assert_eq!(
            lines(&root_aliases(&t)),
            [
                "src/core/provisioner.rs:3",
                "src/core/provisioner.rs:6",
                "src/core/provisioner.rs:7",
                "src/obc/mod.rs:1"
            ]
        );
    }

    #[test]
    fn a_brace_group_is_expanded_with_renames() {
        let t = tree(&[
            ("lib.rs", ""),
            (
                "a.rs",
                "use crate::{\n    b::{B, C as D},\n    c::{self, E},\n};\n",
            ),
            ("b.rs", ""),
            ("c.rs", ""),
        ]);
        let written: Vec<String> = t.refs.iter().map(|r| r.written.join("::")).collect();
        assert_eq!(
            written,
            [
                "crate::b::B",
                "crate::b::C",
                "crate::c::self",
                "crate::c::E"
            ]
        );
        let edges: Vec<(Module, Module)> = t.edges().into_keys().collect();
        assert_eq!(
            edges,
            [(module("a"), module("b")), (module("a"), module("c"))]
        );
        assert_eq!(t.refs[0].text, "use crate::{b::{B, C as D}, c::{self, E}};");
        assert!(t.refs.iter().all(|r| r.line == 1 && r.kind == Kind::Use));
    }

    #[test]
    fn a_pub_use_re_export_is_not_an_edge() {
        let t = tree(&[
            ("lib.rs", ""),
            (
                "a.rs",
                "pub use crate::b::B;\npub(crate) use super::b::C;\n",
            ),
            ("b.rs", "use crate::a::A;\n"),
        ]);
        assert!(
            t.refs
                .iter()
                .filter(|r| r.from == module("a"))
                .all(|r| r.kind == Kind::ReExport)
        );
        assert_eq!(circles(&t), Vec::<Vec<String>>::new());
    }

    #[test]
    fn a_parents_bare_reference_to_its_child_is_not_an_edge() {
        let parent = "mod meta;\nuse meta::Meta;\npub struct Plan;\nfn f() { meta::g() }\n";
        let child = "use super::Plan;\npub struct Meta;\n";
        let t = tree(&[("lib.rs", ""), ("plan.rs", parent), ("plan/meta.rs", child)]);
        assert_eq!(circles(&t), Vec::<Vec<String>>::new());
        // Qualified, the same reference is an edge (as in the prototype).
        let parent = "mod meta;\nuse self::meta::Meta;\npub struct Plan;\n";
        let t = tree(&[("lib.rs", ""), ("plan.rs", parent), ("plan/meta.rs", child)]);
        assert_eq!(circles(&t), [["plan", "plan/meta"]]);
    }

    #[test]
    fn the_test_module_makes_no_edges_and_resolves_from_itself() {
        let a = "pub struct A;\n\n#[cfg(test)]\nmod tests {\n    use super::super::b::B;\n}\n";
        let t = tree(&[("lib.rs", ""), ("a.rs", a), ("b.rs", "use crate::a::A;\n")]);
        assert_eq!(circles(&t), Vec::<Vec<String>>::new());
        let r = t
            .refs
            .iter()
            .find(|r| r.in_tests)
            .expect("the test module's use");
        assert_eq!((r.line, r.path.join("::")), (5, "b::B".to_owned()));
    }

    #[test]
    fn comments_do_not_count_and_keep_line_numbers() {
        let a = "/* use crate::b::B;\n   crate::b::B */\n// use crate::b::B;\nuse crate::c::C;\n";
        let t = tree(&[("lib.rs", ""), ("a.rs", a), ("b.rs", ""), ("c.rs", "")]);
        let found: Vec<String> = t.refs.iter().map(|r| r.location()).collect();
        assert_eq!(found, ["src/a.rs:4: use crate::c::C;"]);
    }
}
