//! Every example of `ffi-examples/` is also a test: the C programs (one per recipe) and the
//! C++ demo are compiled with warnings as errors against `include/zklock.h` and the freshly
//! built `libzklock.so`, then run, like the Python demo, against a real ZooKeeper server; two
//! processes (also C against Python) contend on one lock; and the C examples run again under
//! AddressSanitizer + UndefinedBehaviorSanitizer (leak detection on) and under valgrind, where
//! the toolchain has them. The secured examples (`secured.c`, `secured.cpp`) run against a
//! TLS-only server that requires client certificates and a SASL DIGEST-MD5 server.
#![cfg(feature = "testing")]

use crate::common::{hosts, unique_path, SpawnGuarded};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

use zklock::testing::{ClientAuth, ClientCert, TestingServer};

/// The C examples: one per recipe, and the listeners.
const C_EXAMPLES: &[&str] = &[
    "mutex",
    "semaphore_mutex",
    "simple_lock",
    "rwlock",
    "semaphore",
    "multi_lock",
    "listeners",
];

pub(crate) const C_FLAGS: &[&str] = &[
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-pthread",
];
const CXX_FLAGS: &[&str] = &[
    "-std=c++17",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-pthread",
];
const SANITIZE: &[&str] = &[
    "-fsanitize=address,undefined",
    "-fno-omit-frame-pointer",
    "-g",
];

/// `target/<profile>/ffi-examples`, with `lib/` holding `libzklock.so` and its SONAME link.
fn build_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let so = crate::common::ffi::cdylib();
        let dir = crate::common::ffi::profile_dir().join("ffi-examples");
        let lib = dir.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        // Each test process makes these again while others may run their programs: a link
        // made aside and renamed over the old one, never a moment without it.
        for name in ["libzklock.so", soname()] {
            let aside = lib.join(format!("{name}.{}", std::process::id()));
            let _ = std::fs::remove_file(&aside);
            std::os::unix::fs::symlink(&so, &aside).unwrap();
            std::fs::rename(&aside, lib.join(name)).unwrap();
        }
        dir
    })
}

/// The shared library's SONAME (libzklock.so.0.<minor> while the major version is 0).
fn soname() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let (major, minor) = (
            env!("CARGO_PKG_VERSION_MAJOR"),
            env!("CARGO_PKG_VERSION_MINOR"),
        );
        match major {
            "0" => format!("libzklock.so.0.{minor}"),
            _ => format!("libzklock.so.{major}"),
        }
    })
}

fn lib_dir() -> PathBuf {
    build_dir().join("lib")
}

/// Compiles one example (once per process); returns the executable. It is written aside and
/// renamed into place: another test process may be running the one it replaces (writing over
/// a running program, or running one being written, fails with "Text file busy").
pub(crate) fn compile(compiler: &str, flags: &[&str], source: &str, out_name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let repo = crate::common::ffi::repo();
    let exe = build_dir().join(out_name);
    let aside = build_dir().join(format!("{out_name}.{}", std::process::id()));
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.iter().any(|b| b == out_name) {
        return exe;
    }
    let lib = lib_dir();
    let out = Command::new(compiler)
        .args(flags)
        .arg("-I")
        .arg(repo.join("include"))
        .arg(repo.join(source))
        .arg("-o")
        .arg(&aside)
        .arg("-L")
        .arg(&lib)
        .arg("-lzklock")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {source} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&aside, &exe).unwrap();
    built.push(out_name.to_string());
    exe
}

/// A command for an example with the server, a lock path prefix of its own and the library.
fn example(exe: &Path, zkl_path: &str) -> Command {
    let mut cmd = Command::new(exe);
    cmd.env("ZKL_HOSTS", hosts())
        .env("ZKL_PATH", zkl_path)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("ZKLOCK_LIBRARY", lib_dir().join("libzklock.so"))
        .stdin(Stdio::null());
    cmd
}

fn run(mut cmd: Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e}"));
    let text = format!(
        "{what}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    eprintln!("{text}");
    out
}

fn python() -> Option<&'static str> {
    ["python3", "python"]
        .into_iter()
        .find(|p| crate::common::ffi::have(p))
}

#[test]
fn c_examples_pass() {
    for name in C_EXAMPLES {
        let exe = compile("cc", C_FLAGS, &format!("ffi-examples/c/{name}.c"), name);
        let out = run(example(&exe, &unique_path(&format!("c-{name}"))), name);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(&format!("{name}: all ")), "{stdout}");
        assert!(!stdout.contains("FAIL"), "{stdout}");
    }
}

#[test]
fn cpp_demo_passes() {
    let exe = compile("c++", CXX_FLAGS, "ffi-examples/cpp/demo.cpp", "demo_cpp");
    let out = run(example(&exe, &unique_path("cpp")), "demo.cpp");
    assert!(String::from_utf8_lossy(&out.stdout).contains("demo.cpp: all checks passed"));
}

/// zklock.hpp's guarded writes (all or none, only while held) and a semaphore's several leases
/// at once (acquire_many, release_many).
#[test]
fn cpp_guarded_writes_and_acquire_many_pass() {
    let exe = compile(
        "c++",
        CXX_FLAGS,
        "ffi-examples/cpp/guarded.cpp",
        "guarded_cpp",
    );
    let out = run(example(&exe, &unique_path("cpp-guarded")), "guarded.cpp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("guarded.cpp: all checks passed"),
        "{stdout}"
    );
}

/// A zklock::Lock as C++ users hold locks (std::lock_guard, std::unique_lock, std::scoped_lock),
/// a Guard across a move of its Lock and after unlock(), and the listeners, statistics and
/// revocation; plain and under ASan + UBSan.
#[test]
fn cpp_lockable_passes_plain_and_under_sanitizers() {
    let exe = compile(
        "c++",
        CXX_FLAGS,
        "ffi-examples/cpp/lockable.cpp",
        "lockable_cpp",
    );
    let out = run(example(&exe, &unique_path("cpp-lockable")), "lockable.cpp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("lockable.cpp: all checks passed"),
        "{stdout}"
    );
    assert!(
        sanitizers_work(),
        "cc cannot build with -fsanitize=address,undefined: run scripts/install-deps.sh"
    );
    let flags: Vec<&str> = CXX_FLAGS.iter().chain(SANITIZE).copied().collect();
    let exe = compile(
        "c++",
        &flags,
        "ffi-examples/cpp/lockable.cpp",
        "lockable_cpp-asan",
    );
    let out = run_sanitized(&exe, "cpp-lockable");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("lockable.cpp: all checks passed"),
        "{stdout}"
    );
}

/// Before C++17 the C++ layer says so at compile time, in words.
#[test]
fn zklock_hpp_refuses_cpp14_with_its_own_message() {
    let repo = crate::common::ffi::repo();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("t.cpp");
    std::fs::write(&src, "#include \"zklock.hpp\"\nint main() { return 0; }\n").unwrap();
    let out = Command::new("c++")
        .args(["-std=c++14", "-fsyntax-only", "-I"])
        .arg(repo.join("include"))
        .arg(&src)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("zklock.hpp needs C++17 or later"), "{err}");
}

#[test]
fn python_demo_passes() {
    let Some(py) = python() else {
        eprintln!("no python3: skipping the Python demo");
        return;
    };
    let mut cmd = example(Path::new(py), &unique_path("python"));
    cmd.arg(crate::common::ffi::repo().join("ffi-examples/python/demo.py"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = run(cmd, "demo.py");
    assert!(String::from_utf8_lossy(&out.stdout).contains("demo.py: all tests passed"));
}

/// Two processes run the contention loop of `common.h` on one lock: each round reads a
/// counter file, waits, and writes it back plus one, so a lost update shows an overlap.
fn contend(first: Command, second: Command, rounds: u32, counter: &Path, what: &str) {
    let mut kids: Vec<_> = [first, second]
        .into_iter()
        .map(|mut c| {
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn_guarded()
        })
        .collect();
    for k in kids.drain(..) {
        let out = k.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{what}: a contender failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let n: u32 = std::fs::read_to_string(counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        n,
        2 * rounds,
        "{what}: lost updates mean two holders at once"
    );
}

#[test]
fn two_c_processes_contend_on_each_recipe() {
    let rounds = 15;
    for name in C_EXAMPLES {
        let exe = compile("cc", C_FLAGS, &format!("ffi-examples/c/{name}.c"), name);
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("counter");
        let zkl_path = unique_path(&format!("contend-{name}"));
        let mk = || {
            let mut c = example(&exe, &zkl_path);
            c.arg("contend").arg(&counter).arg(rounds.to_string());
            c
        };
        contend(mk(), mk(), rounds, &counter, name);
    }
}

#[test]
fn c_and_python_processes_contend_on_one_mutex() {
    let Some(py) = python() else {
        eprintln!("no python3: skipping C-against-Python contention");
        return;
    };
    let exe = compile("cc", C_FLAGS, "ffi-examples/c/mutex.c", "mutex");
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    let zkl_path = unique_path("contend-c-python");
    let rounds = 15;
    let mut c = example(&exe, &zkl_path);
    c.arg("contend").arg(&counter).arg(rounds.to_string());
    let mut p = example(Path::new(py), &zkl_path);
    p.arg(crate::common::ffi::repo().join("ffi-examples/python/demo.py"))
        .arg("contend")
        .arg(&counter)
        .arg(rounds.to_string())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    contend(c, p, rounds, &counter, "C against Python");
}

/// Whether `cc` can build and run a sanitized program here.
fn sanitizers_work() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("t.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let exe = dir.path().join("t");
    let built = Command::new("cc")
        .args(SANITIZE)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    built && Command::new(&exe).status().is_ok_and(|s| s.success())
}

#[test]
fn c_examples_are_clean_under_address_and_undefined_sanitizers() {
    assert!(
        sanitizers_work(),
        "cc cannot build with -fsanitize=address,undefined: run scripts/install-deps.sh"
    );
    let flags: Vec<&str> = C_FLAGS.iter().chain(SANITIZE).copied().collect();
    for name in C_EXAMPLES {
        let exe = compile(
            "cc",
            &flags,
            &format!("ffi-examples/c/{name}.c"),
            &format!("{name}-asan"),
        );
        run_sanitized(&exe, name);
    }
}

/// Runs a sanitizer build of an example; fails on any report of ASan, LeakSanitizer or UBSan.
fn run_sanitized(exe: &Path, name: &str) -> std::process::Output {
    run_sanitized_with(example(exe, &unique_path(&format!("asan-{name}"))), name)
}

/// As [`run_sanitized`], for a command made ready by the caller.
fn run_sanitized_with(mut cmd: Command, name: &str) -> std::process::Output {
    cmd.env(
        "ASAN_OPTIONS",
        "detect_leaks=1:abort_on_error=0:exitcode=86",
    )
    .env(
        "UBSAN_OPTIONS",
        "print_stacktrace=1:halt_on_error=1:exitcode=87",
    );
    let out = run(cmd, &format!("{name} (ASan+UBSan)"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for report in [
        "ERROR: AddressSanitizer",
        "ERROR: LeakSanitizer",
        "runtime error:",
    ] {
        assert!(!stderr.contains(report), "{name}: {stderr}");
    }
    out
}

/// The C++ layer (zklock.hpp: RAII handles, the read-write pair, leases, hold state, ACL) under
/// the same sanitizers.
#[test]
fn cpp_demo_is_clean_under_address_and_undefined_sanitizers() {
    assert!(
        sanitizers_work(),
        "cc cannot build with -fsanitize=address,undefined: run scripts/install-deps.sh"
    );
    let flags: Vec<&str> = CXX_FLAGS.iter().chain(SANITIZE).copied().collect();
    let exe = compile("c++", &flags, "ffi-examples/cpp/demo.cpp", "demo_cpp-asan");
    let out = run_sanitized(&exe, "cpp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("demo.cpp: all checks passed"), "{stdout}");
}

/// The secured servers of issue 27 for `secured.c` and `secured.cpp`: a TLS-only server that
/// requires client certificates and a server that requires SASL DIGEST-MD5 (user bob), started
/// at once, and a client certificate of the TLS server's CA.
struct Secured {
    tls: TestingServer,
    sasl: TestingServer,
    client: ClientCert,
}

const SASL_USER: &str = "bob";
const SASL_PASSWORD: &str = "bob-secret";

fn secured_servers() -> Secured {
    let tls = std::thread::spawn(|| TestingServer::start_tls(ClientAuth::Need));
    let sasl = TestingServer::start_sasl(&[(SASL_USER, SASL_PASSWORD)])
        .expect("start a SASL ZooKeeper server");
    let tls = tls.join().unwrap().expect("start a TLS ZooKeeper server");
    let client = tls
        .certs()
        .unwrap()
        .client("secured-example")
        .expect("a client certificate");
    Secured { tls, sasl, client }
}

/// An example's command with the secured servers in its environment. `tls_hosts`: the TLS
/// server as the example is to name it.
fn secured_example(exe: &Path, s: &Secured, tls_hosts: &str, what: &str) -> Command {
    let mut cmd = example(exe, &unique_path(what));
    cmd.env("ZKL_TLS_HOSTS", tls_hosts)
        .env("ZKL_TLS_CA", s.tls.certs().unwrap().ca_path())
        .env("ZKL_TLS_CERT", s.client.cert_path())
        .env("ZKL_TLS_KEY", s.client.key_path())
        .env("ZKL_SASL_HOSTS", s.sasl.connect_string())
        .env("ZKL_SASL_USER", SASL_USER)
        .env("ZKL_SASL_PASSWORD", SASL_PASSWORD);
    cmd
}

/// What a user of `secured.c` checks: a mutex taken over mutual TLS and over SASL, each with a
/// fencing token; a connect without a client certificate refused as ZKL_AUTH_FAILED with a
/// message naming the client certificate; a wrong password refused as ZKL_AUTH_FAILED with a
/// message naming the user.
fn assert_secured_c_output(stdout: &str) {
    assert!(stdout.contains("secured: all 4 tests passed"), "{stdout}");
    assert!(!stdout.contains("skip"), "{stdout}");
    for what in ["mutual TLS", "SASL DIGEST-MD5"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{what}: held ")))
            .unwrap_or_else(|| panic!("no lock over {what}:\n{stdout}"));
        let token: i64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(token > 0, "{line}");
    }
    let refused = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?}:\n{stdout}"))
            .to_string()
    };
    let no_cert = refused("mutual TLS without a client certificate: ZKL_AUTH_FAILED after ");
    assert!(no_cert.contains("client certificate"), "{no_cert}");
    let wrong = refused("SASL with a wrong password: ZKL_AUTH_FAILED after ");
    assert!(wrong.contains(SASL_USER), "{wrong}");
}

/// As [`assert_secured_c_output`], for `secured.cpp` (its TLS part over files and over PEM texts).
fn assert_secured_cpp_output(stdout: &str) {
    assert!(
        stdout.contains("secured.cpp: all checks passed"),
        "{stdout}"
    );
    assert!(!stdout.contains("skip"), "{stdout}");
    for what in ["mutual TLS (files)", "mutual TLS (PEM)", "SASL DIGEST-MD5"] {
        assert!(
            stdout.contains(&format!("{what}: held ")),
            "no lock over {what}:\n{stdout}"
        );
    }
    let line = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?}:\n{stdout}"))
            .to_string()
    };
    let no_cert = line("mutual TLS without a client certificate: ZKL_AUTH_FAILED: ");
    assert!(no_cert.contains("client certificate"), "{no_cert}");
    let wrong = line("SASL with a wrong password: ZKL_AUTH_FAILED: ");
    assert!(wrong.contains(SASL_USER), "{wrong}");
}

/// The secured examples against real secured servers: `secured.c` (the TLS server named by
/// address, TLS turned on by the options) and `secured.cpp` (named `tcp+tls://`).
#[test]
fn secured_examples_lock_over_tls_and_sasl_and_report_refusals() {
    let s = secured_servers();
    let exe = compile("cc", C_FLAGS, "ffi-examples/c/secured.c", "secured");
    let out = run(
        secured_example(&exe, &s, &s.tls.address(), "c-secured"),
        "secured.c",
    );
    assert_secured_c_output(&String::from_utf8_lossy(&out.stdout));

    let exe = compile(
        "c++",
        CXX_FLAGS,
        "ffi-examples/cpp/secured.cpp",
        "secured_cpp",
    );
    let out = run(
        secured_example(&exe, &s, &s.tls.connect_string(), "cpp-secured"),
        "secured.cpp",
    );
    assert_secured_cpp_output(&String::from_utf8_lossy(&out.stdout));
}

/// The same under AddressSanitizer + UndefinedBehaviorSanitizer (leak detection on): the TLS
/// and SASL paths, the refusals included, leak nothing and touch no freed memory.
#[test]
fn secured_examples_are_clean_under_address_and_undefined_sanitizers() {
    assert!(
        sanitizers_work(),
        "cc cannot build with -fsanitize=address,undefined: run scripts/install-deps.sh"
    );
    let s = secured_servers();
    let flags: Vec<&str> = C_FLAGS.iter().chain(SANITIZE).copied().collect();
    let exe = compile("cc", &flags, "ffi-examples/c/secured.c", "secured-asan");
    let out = run_sanitized_with(
        secured_example(&exe, &s, &s.tls.address(), "asan-c-secured"),
        "secured.c",
    );
    assert_secured_c_output(&String::from_utf8_lossy(&out.stdout));

    let flags: Vec<&str> = CXX_FLAGS.iter().chain(SANITIZE).copied().collect();
    let exe = compile(
        "c++",
        &flags,
        "ffi-examples/cpp/secured.cpp",
        "secured_cpp-asan",
    );
    let out = run_sanitized_with(
        secured_example(&exe, &s, &s.tls.connect_string(), "asan-cpp-secured"),
        "secured.cpp",
    );
    assert_secured_cpp_output(&String::from_utf8_lossy(&out.stdout));
}

/// The system libraries a static link needs, as `cargo rustc --crate-type staticlib -- --print
/// native-static-libs` reports them; the README's "Using from C" names the same list.
const NATIVE_STATIC_LIBS: &str = "-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";

/// A symbol of the system's GSSAPI library that a build with `sasl-gssapi` links to.
const GSSAPI_SYMBOL: &str = "gss_display_status";

#[test]
fn c_example_links_statically_with_the_documented_libraries() {
    let lib_a = crate::common::ffi::cdylib().with_file_name("libzklock.a");
    assert!(lib_a.exists(), "{} not built", lib_a.display());
    let repo = crate::common::ffi::repo();
    let exe = build_dir().join("mutex-static");
    // A build with Kerberos (`sasl-gssapi`: the tests' build) needs the system's GSSAPI too.
    let gssapi = std::fs::read(&lib_a)
        .unwrap()
        .windows(GSSAPI_SYMBOL.len())
        .any(|w| w == GSSAPI_SYMBOL.as_bytes());
    let out = Command::new("cc")
        .args(C_FLAGS)
        .arg("-I")
        .arg(repo.join("include"))
        .arg(repo.join("ffi-examples/c/mutex.c"))
        .arg(&lib_a)
        .args(NATIVE_STATIC_LIBS.split(' '))
        .args(gssapi.then_some("-lgssapi_krb5"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "static link failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No libzklock.so is needed at run time.
    let mut cmd = example(&exe, &unique_path("static"));
    cmd.env_remove("LD_LIBRARY_PATH");
    let out = run(cmd, "mutex (static)");
    assert!(String::from_utf8_lossy(&out.stdout).contains("mutex: all "));
    let docs = std::fs::read_to_string(repo.join("README.md")).unwrap();
    assert!(
        docs.contains(NATIVE_STATIC_LIBS),
        "the README must name the static link's libraries: {NATIVE_STATIC_LIBS}"
    );
}

/// Every C example is clean under docs/c-api.md's valgrind line: no error, nothing definitely
/// lost; the "possibly lost" blocks of the library's threads (still running at exit) are not
/// counted (issue 40).
#[test]
fn c_examples_are_clean_under_the_documented_valgrind_line() {
    assert!(
        crate::common::ffi::have("valgrind"),
        "valgrind is not installed: run scripts/install-deps.sh"
    );
    let line = "valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=1";
    let docs = std::fs::read_to_string(crate::common::ffi::repo().join("docs/c-api.md")).unwrap();
    assert!(docs.contains(line), "docs/c-api.md no longer says `{line}`");
    for name in C_EXAMPLES {
        let exe = compile("cc", C_FLAGS, &format!("ffi-examples/c/{name}.c"), name);
        let mut words = line.split(' ');
        let mut valgrind = example(
            Path::new(words.next().unwrap()),
            &unique_path(&format!("valgrind-{name}")),
        );
        // Under valgrind a connect is many times slower (2 s was too short at load 10-25):
        // the examples' sessions wait for their connection longer here.
        valgrind.env("ZKL_CONNECT_TIMEOUT_MS", "30000");
        valgrind.args(words).arg(&exe);
        let out = run(valgrind, &format!("{name} under valgrind"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(&format!("{name}: all ")), "{stdout}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("definitely lost: 0 bytes") || stderr.contains("no leaks are possible"),
            "{name}: {stderr}"
        );
    }
}
