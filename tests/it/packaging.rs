//! The C library installed as C libraries are (scripts/install.sh, cargo-c's layout):
//! a prefix with the SONAME'd shared library, the static library, the C and C++ headers, a
//! pkg-config file, the command and its manual page, with which the README's C program builds
//! and runs as the README says, and C and C++ programs build both ways and lock against a real
//! server; one version everywhere; the crate ships its license texts.
#![cfg(feature = "testing")]

use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sh(line: String) -> String {
    run(Command::new("sh").arg("-c").arg(line))
}

/// Locks /packaging/<name> through the installed library and prints version, token > 0.
const APP_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zklock.h"
int main(int argc, char **argv) {
  zkl_client *c = NULL;
  zkl_lock *l = NULL;
  int64_t token = 0;
  if (argc != 3 || strcmp(zkl_version(), ZKL_VERSION_STRING) != 0) return 2;
  if (zkl_client_connect(argv[1], 5000, &c) != ZKL_OK ||
      zkl_mutex_new(c, argv[2], &l) != ZKL_OK || zkl_lock_acquire(l, 5000) != ZKL_OK ||
      zkl_lock_fencing_token(l, &token) != ZKL_OK || zkl_lock_release(l) != ZKL_OK) {
    fprintf(stderr, "%s\n", zkl_last_error_message());
    return 1;
  }
  printf("%s locked token>0=%d\n", zkl_version(), token > 0);
  zkl_lock_free(l);
  zkl_client_free(c);
  return 0;
}
"#;

const APP_CPP: &str = r#"#include <iostream>
#include "zklock.hpp"
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  zklock::Client client(argv[1]);
  auto [read, write] = client.rwlock(argv[2]);
  zklock::Guard w(write);
  zklock::Guard r(read);  // downgrade
  std::cout << "c++ locked " << (read.hold_state() == zklock::HoldState::held) << "\n";
  return 0;
}
"#;

/// The first fenced block of `lang` after the README's heading `heading`.
fn readme_block(heading: &str, lang: &str, containing: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme.find(heading).expect(heading)..];
    let fence = format!("```{lang}\n");
    let mut rest = section;
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body.find("```").unwrap();
        if body[..end].contains(containing) {
            return body[..end].to_string();
        }
        rest = &body[end + 3..];
    }
    panic!("no ```{lang} block with {containing:?} under {heading}");
}

#[test]
fn installed_library_links_dynamically_and_statically_and_locks() {
    let root = env!("CARGO_MANIFEST_DIR");
    let version = env!("CARGO_PKG_VERSION");
    let hosts = crate::common::shared().connect_string();
    let prefix = tempfile::tempdir().unwrap();
    let p = prefix.path();
    let lib = p.join("lib");

    // The README's C program, installed and built as the README says for a prefix the loader
    // does not search (with the test's prefix for $HOME/.local, its server and a path of its own).
    let path = format!("/packaging/readme-{}", std::process::id());
    let program = readme_block("## Using from C", "c", "int main")
        .replace("127.0.0.1:2181", &hosts)
        .replace("/locks/orders", &path);
    std::fs::write(p.join("app.c"), program).unwrap();
    let steps = readme_block(
        "## Using from C",
        "sh",
        "scripts/install.sh \"$HOME/.local\"",
    )
    .replace("scripts/install.sh", &format!("{root}/scripts/install.sh"))
    .replace("$HOME/.local", &p.display().to_string());
    // As a user runs it: plain rustc, not the lint driver scripts/test.sh builds the tests with
    // (a build under another wrapper is another build, and scripts/test.sh makes this one
    // ahead of the test, without it).
    let mut install = Command::new("sh");
    install
        .args(["-ec", &steps])
        .current_dir(p)
        .env_remove("PKG_CONFIG_PATH")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        // The documented build, its default features (scripts/test.sh asks for Kerberos in the
        // packages' builds; a build with it links the system's GSSAPI, which has no archive
        // for `cc -static`).
        .env_remove("ZKLOCK_CARGO_FEATURES");
    // scripts/test.sh builds that release library ahead, in a target directory of its own.
    if let Some(dir) = std::env::var_os("ZKL_PKG_TARGET_DIR") {
        install.env("CARGO_TARGET_DIR", dir);
    }
    let out = run(&mut install);
    assert!(
        out.contains(&format!(
            "is not on the loader's search path: link programs with -Wl,-rpath,{}",
            lib.display()
        )),
        "install.sh says how programs find the library: {out}"
    );
    assert!(
        out.contains(&format!("holding {path}, fencing token ")),
        "{out}"
    );
    // The README's other way: no -rpath, LD_LIBRARY_PATH.
    let ld = steps
        .lines()
        .find_map(|l| l.strip_prefix("# or without -rpath: "))
        .expect("the LD_LIBRARY_PATH line")
        .to_string();
    sh(format!(
        "cd {0} && cc -std=c99 app.c $(PKG_CONFIG_PATH={1}/pkgconfig pkg-config --cflags --libs zklock) -o app",
        p.display(),
        lib.display()
    ));
    let out = sh(format!("cd {} && {ld}", p.display()));
    assert!(
        out.contains(&format!("holding {path}, fencing token ")),
        "{out}"
    );

    for f in ["libzklock.so", "libzklock.a", "pkgconfig/zklock.pc"] {
        assert!(lib.join(f).exists(), "{f} not installed");
    }
    for f in ["zklock.h", "zklock.hpp"] {
        assert!(
            p.join("include").join(f).exists(),
            "include/{f} not installed"
        );
    }
    // The SONAME names a file of the prefix: what programs load at run time; it is the
    // version's ABI part (0.MINOR while the major version is 0).
    let soname = sh(format!(
        "objdump -p {}/libzklock.so | sed -n 's/.*SONAME *//p'",
        lib.display()
    ));
    let soname = soname.trim();
    assert_eq!(
        soname,
        format!("libzklock.so.0.{}", env!("CARGO_PKG_VERSION_MINOR"))
    );
    assert!(
        lib.join(soname).exists(),
        "{soname} missing in {}",
        lib.display()
    );
    assert!(lib.join(format!("libzklock.so.{version}")).exists());

    // The command and its manual pages (zklock.1 carries the version).
    let pages: Vec<_> = std::fs::read_dir(format!("{root}/man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".1"))
        .collect();
    assert!(pages.len() > 1, "{pages:?}");
    for page in &pages {
        let installed = p.join("share/man/man1").join(page);
        assert_eq!(
            std::fs::read_to_string(&installed)
                .unwrap_or_else(|e| panic!("share/man/man1/{page} not installed: {e}")),
            std::fs::read_to_string(format!("{root}/man/{page}")).unwrap()
        );
    }
    let man = std::fs::read_to_string(p.join("share/man/man1/zklock.1")).unwrap();
    assert!(
        man.contains(&format!("\"zklock {version}\"")),
        "the manual's version"
    );
    let out = run(Command::new(p.join("bin/zklock")).arg("--version"));
    assert_eq!(out.trim(), format!("zklock {version}"));

    // One version: Cargo.toml's, in the installed header's macros too.
    let header = std::fs::read_to_string(p.join("include/zklock.h")).unwrap();
    for (name, value) in [
        (
            "ZKL_VERSION_MAJOR",
            env!("CARGO_PKG_VERSION_MAJOR").to_string(),
        ),
        (
            "ZKL_VERSION_MINOR",
            env!("CARGO_PKG_VERSION_MINOR").to_string(),
        ),
        (
            "ZKL_VERSION_PATCH",
            env!("CARGO_PKG_VERSION_PATCH").to_string(),
        ),
        ("ZKL_VERSION_STRING", format!("\"{version}\"")),
    ] {
        assert!(
            header.contains(&format!("#define {name} {value}\n")),
            "{name} is not {value}"
        );
    }

    let pc = |args: &str| {
        run(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .args(args.split(' '))
            .arg("zklock"))
        .trim()
        .to_string()
    };
    assert_eq!(pc("--modversion"), version);
    let src = p.join("app-check.c");
    std::fs::write(&src, APP_C).unwrap();
    let want = format!("{version} locked token>0=1");

    // Dynamic: the installed SONAME is what the program loads.
    let dynamic = p.join("app-dynamic");
    sh(format!(
        "cc -std=c99 -Wall -Wextra -Werror {} -o {} {} -Wl,-rpath,{}",
        src.display(),
        dynamic.display(),
        pc("--cflags --libs"),
        lib.display()
    ));
    let out = run(Command::new(&dynamic).args([&hosts, "/packaging/dynamic"]));
    assert_eq!(out.trim(), want);
    let ldd = run(Command::new("ldd").arg(&dynamic));
    assert!(
        ldd.contains(&format!("{}/{soname}", lib.display())),
        "{ldd}"
    );

    // Static: the archive plus exactly the private libraries the .pc names.
    let stat = p.join("app-static");
    sh(format!(
        "cc -std=c99 {} -o {} {} {}/libzklock.a {}",
        src.display(),
        stat.display(),
        pc("--cflags"),
        lib.display(),
        pc("--libs-only-l --static").replace("-lzklock", "")
    ));
    let out = run(Command::new(&stat).args([&hosts, "/packaging/static"]));
    assert_eq!(out.trim(), want);
    assert!(!run(Command::new("ldd").arg(&stat)).contains("libzklock"));

    // Fully static (`cc -static`), with the .pc's static line as it is: its unwinder is
    // libgcc_eh, which a static program can link (libgcc_s has no archive) (issue 40).
    let all_static = p.join("app-all-static");
    sh(format!(
        "cc -std=c99 -static {} -o {} {} 2>&1",
        src.display(),
        all_static.display(),
        pc("--cflags --libs --static"),
    ));
    let out = run(Command::new(&all_static).args([&hosts, "/packaging/all-static"]));
    assert_eq!(out.trim(), want);

    // C++: the installed zklock.hpp beside zklock.h.
    let cpp = p.join("app.cpp");
    std::fs::write(&cpp, APP_CPP).unwrap();
    let cxx = p.join("app-cpp");
    sh(format!(
        "c++ -std=c++17 -Wall -Wextra -Werror -pedantic {} -o {} {} -Wl,-rpath,{}",
        cpp.display(),
        cxx.display(),
        pc("--cflags --libs"),
        lib.display()
    ));
    let out = run(Command::new(&cxx).args([&hosts, "/packaging/cpp"]));
    assert_eq!(out.trim(), "c++ locked 1");
}

/// The Python package's version is the crate's: setup.py reads Cargo.toml, pyproject.toml
/// names none (bindings/python/tests/test_packaging.py checks the built package).
#[test]
fn the_python_package_takes_its_version_from_cargo_toml() {
    let root = env!("CARGO_MANIFEST_DIR");
    let pyproject =
        std::fs::read_to_string(format!("{root}/bindings/python/pyproject.toml")).unwrap();
    assert!(pyproject.contains("dynamic = [\"version\"]"), "{pyproject}");
    assert!(
        !pyproject.lines().any(|l| l.starts_with("version")),
        "pyproject.toml writes a version of its own"
    );
    let setup = std::fs::read_to_string(format!("{root}/bindings/python/setup.py")).unwrap();
    assert!(setup.contains("version=crate_version(crate_manifest())"));
}

/// Cargo.toml says `MIT OR Apache-2.0`: both texts exist, and the packaged crate carries them.
#[test]
fn the_packaged_crate_carries_both_license_texts() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mit = std::fs::read_to_string(format!("{root}/LICENSE-MIT")).unwrap();
    assert!(
        mit.starts_with("MIT License\n") && mit.contains("Copyright (c) the zklock developers")
    );
    let apache = std::fs::read_to_string(format!("{root}/LICENSE-APACHE")).unwrap();
    assert!(apache.contains("Apache License\n                           Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"));
    let list = run(Command::new(env!("CARGO"))
        .args(["package", "--list", "--allow-dirty", "--offline"])
        .current_dir(root));
    for f in ["LICENSE-MIT", "LICENSE-APACHE"] {
        assert!(list.lines().any(|l| l == f), "{f} not packaged: {list}");
    }
}

/// A Python virtual environment made in the checkout (`python3 -m venv venv`, as the Python
/// package's README and most tutorials name it) is not offered to `git add` (issue 40).
#[test]
fn a_virtual_environment_in_the_checkout_is_ignored() {
    let root = env!("CARGO_MANIFEST_DIR");
    for p in [
        "venv/bin/python",
        ".venv/bin/python",
        "bindings/python/venv/bin/python",
    ] {
        let ignored = Command::new("git")
            .args(["check-ignore", "-q", "--no-index", p])
            .current_dir(root)
            .status()
            .unwrap();
        assert!(ignored.success(), "{p} is not ignored by .gitignore");
    }
}

/// The crate's documentation lists every cargo feature and what it turns on: a crate built
/// without `tls` took TLS options and failed only at run time, and nothing said so (issue 40).
#[test]
fn the_crate_docs_list_every_cargo_feature() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let features: Vec<&str> = manifest
        .split("\n[features]\n")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(" = "))
        .map(|l| l.split(" = ").next().unwrap().trim())
        .filter(|f| *f != "default")
        .collect();
    assert!(features.contains(&"tls"), "{features:?}");
    let lib = std::fs::read_to_string(format!("{root}/src/lib.rs")).unwrap();
    let docs: String = lib
        .lines()
        .take_while(|l| l.starts_with("//!") || l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    for f in features {
        assert!(
            docs.contains(&format!("//! | `{f}` |")),
            "the crate docs' feature table lacks `{f}`"
        );
    }
}

/// The declared `rust-version` is true of what a user builds: no package of the crate's
/// dependency graph (its normal dependencies with every feature, as Cargo.lock resolves them)
/// declares a newer one. Clippy's `incompatible_msrv` checks the crate's own uses of the
/// standard library against it in every build of the test command.
#[test]
fn the_declared_rust_version_covers_every_dependency() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cargo = || {
        let mut c = Command::new(env!("CARGO"));
        c.current_dir(root);
        c
    };
    let tree = run(cargo().args([
        "tree",
        "--locked",
        "--edges",
        "normal",
        "--all-features",
        "--prefix",
        "none",
    ]));
    let used: std::collections::BTreeSet<(String, String)> = tree
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.to_string(),
                w.next()?.trim_start_matches('v').to_string(),
            ))
        })
        .collect();
    let meta: serde_json::Value = serde_json::from_str(&run(cargo().args([
        "metadata",
        "--format-version",
        "1",
        "--locked",
    ])))
    .unwrap();
    let ours = env!("CARGO_PKG_RUST_VERSION");
    // "1.85" is 1.85.0.
    let parse = |v: &str| -> Vec<u32> {
        let mut n: Vec<u32> = v.split('.').map(|n| n.parse().unwrap()).collect();
        n.resize(3, 0);
        n
    };
    let newer: Vec<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let (name, version) = (p["name"].as_str()?, p["version"].as_str()?);
            let needs = p["rust_version"].as_str()?;
            (used.contains(&(name.to_string(), version.to_string())) && parse(needs) > parse(ours))
                .then(|| format!("{name} {version} needs Rust {needs}"))
        })
        .collect();
    assert!(used.len() > 50, "cargo tree listed the graph: {tree}");
    assert!(
        newer.is_empty(),
        "Cargo.toml declares rust-version = {ours}, but: {}",
        newer.join(", ")
    );
}
