//! The install script: a prefix with the SONAME'd shared library, the static library, the
//! header and a pkg-config file that a C program can be built with, both ways.
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

#[test]
fn install_script_gives_a_prefix_that_pkg_config_links_dynamically_and_statically() {
    let root = env!("CARGO_MANIFEST_DIR");
    let prefix = tempfile::tempdir().unwrap();
    let p = prefix.path();
    run(Command::new(format!("{root}/scripts/install.sh")).arg(p));
    let lib = p.join("lib");
    assert!(lib.join("libzklock.so.0").exists() && lib.join("libzklock.so").exists());
    assert!(lib.join("libzklock.a").exists() && p.join("include/zklock.h").exists());
    let soname = run(Command::new("sh").arg("-c").arg(format!(
        "objdump -p {}/libzklock.so | grep SONAME",
        lib.display()
    )));
    assert!(soname.contains("libzklock.so.0"), "{soname}");

    let src = p.join("app.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <string.h>\n#include \"zklock.h\"\n\
         int main(void) {\n  zkl_lock *l = NULL;\n\
           if (zkl_mutex_new(NULL, \"/x\", &l) != ZKL_INVALID_ARGUMENT) return 2;\n\
           printf(\"%s %s\\n\", zkl_version(), zkl_status_name(ZKL_TIMEOUT));\n\
           return strcmp(zkl_version(), ZKL_VERSION_STRING) != 0;\n}\n",
    )
    .unwrap();
    let pc = |args: &str| {
        run(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .args(args.split(' '))
            .arg("zklock"))
        .trim()
        .to_string()
    };
    let version = env!("CARGO_PKG_VERSION");
    // Dynamic: the installed SONAME link is what the program loads.
    let dynamic = p.join("app-dynamic");
    let flags = pc("--cflags --libs");
    run(Command::new("sh").arg("-c").arg(format!(
        "cc -std=c99 {} -o {} {flags} -Wl,-rpath,{}",
        src.display(),
        dynamic.display(),
        lib.display()
    )));
    assert_eq!(
        run(&mut Command::new(&dynamic)).trim(),
        format!("{version} ZKL_TIMEOUT")
    );
    let ldd = run(Command::new("ldd").arg(&dynamic));
    assert!(
        ldd.contains(&format!("{}/libzklock.so.0", lib.display())),
        "{ldd}"
    );
    // Static: the archive plus exactly the private libraries the .pc names.
    let stat = p.join("app-static");
    let cflags = pc("--cflags");
    let private = pc("--libs-only-l --static");
    run(Command::new("sh").arg("-c").arg(format!(
        "cc -std=c99 {} -o {} {cflags} {}/libzklock.a {}",
        src.display(),
        stat.display(),
        lib.display(),
        private.replace("-lzklock", "")
    )));
    assert_eq!(
        run(&mut Command::new(&stat)).trim(),
        format!("{version} ZKL_TIMEOUT")
    );
    assert!(!run(Command::new("ldd").arg(&stat)).contains("libzklock"));
}
