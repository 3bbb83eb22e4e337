//! The C library installed as C libraries are (scripts/install.sh, cargo-c's layout):
//! a prefix with the SONAME'd shared library, the static library, the C and C++ headers and a
//! pkg-config file, with which C and C++ programs build both ways and lock against a real server.
#![cfg(feature = "testing")]

use std::process::Command;

use zklock::testing::TestingServer;

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

#[test]
fn installed_library_links_dynamically_and_statically_and_locks() {
    let root = env!("CARGO_MANIFEST_DIR");
    let hosts = TestingServer::shared().connect_string();
    let prefix = tempfile::tempdir().unwrap();
    let p = prefix.path();
    run(Command::new(format!("{root}/scripts/install.sh")).arg(p));
    let lib = p.join("lib");
    for f in ["libzklock.so", "libzklock.a", "pkgconfig/zklock.pc"] {
        assert!(lib.join(f).exists(), "{f} not installed");
    }
    for f in ["zklock.h", "zklock.hpp"] {
        assert!(
            p.join("include").join(f).exists(),
            "include/{f} not installed"
        );
    }
    // The SONAME names a file of the prefix: what programs load at run time.
    let soname = sh(format!(
        "objdump -p {}/libzklock.so | sed -n 's/.*SONAME *//p'",
        lib.display()
    ));
    let soname = soname.trim();
    assert!(soname.starts_with("libzklock.so."), "{soname}");
    assert!(
        lib.join(soname).exists(),
        "{soname} missing in {}",
        lib.display()
    );

    let pc = |args: &str| {
        run(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .args(args.split(' '))
            .arg("zklock"))
        .trim()
        .to_string()
    };
    let version = env!("CARGO_PKG_VERSION");
    let src = p.join("app.c");
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
