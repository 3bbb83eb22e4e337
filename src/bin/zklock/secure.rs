//! Secured ensembles: the TLS, SASL and digest options, and the password files they name.

use std::path::{Path, PathBuf};

use clap::Args;
use zklock::{Options, Sasl, Tls};

/// Credentials and TLS: no secret is ever taken from the command line (`ps` shows it), only
/// from a file or the environment.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct Secure {
    /// Connect with TLS (ZooKeeper's secureClientPort), trusting the system's certificate
    /// authorities unless --tls-ca is given. Any --tls-* option implies it; a host written
    /// tcp+tls://host:port uses TLS by itself, one written tcp://host:port never.
    #[arg(
        long,
        env = "ZKL_TLS",
        value_parser = clap::builder::FalseyValueParser::new(),
        help_heading = "Secured ensembles"
    )]
    tls: bool,
    /// Trust the certificate authorities of this PEM file (instead of the system's).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_CA",
        help_heading = "Secured ensembles"
    )]
    tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM, with its chain), for mutual TLS (ssl.clientAuth=need);
    /// the servers know the client as x509:<its subject>. Needs --tls-key.
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_CERT",
        help_heading = "Secured ensembles"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1; an encrypted PKCS#8 key
    /// needs --tls-key-password-file or ZKL_TLS_KEY_PASSWORD).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_KEY",
        help_heading = "Secured ensembles"
    )]
    tls_key: Option<PathBuf>,
    /// A file holding the password of an encrypted --tls-key (one trailing newline is
    /// stripped); else the environment's ZKL_TLS_KEY_PASSWORD.
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_KEY_PASSWORD_FILE",
        help_heading = "Secured ensembles"
    )]
    tls_key_password_file: Option<PathBuf>,
    /// Authenticate with SASL DIGEST-MD5 as USER (servers with SASLAuthenticationProvider); the
    /// servers know the client as sasl:USER. The password comes from --sasl-password-file, else
    /// the environment's ZKL_SASL_PASSWORD: never from the command line.
    #[arg(
        long,
        value_name = "USER",
        env = "ZKL_SASL_USER",
        help_heading = "Secured ensembles"
    )]
    sasl_user: Option<String>,
    /// A file holding --sasl-user's password (one trailing newline is stripped).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_SASL_PASSWORD_FILE",
        help_heading = "Secured ensembles"
    )]
    sasl_password_file: Option<PathBuf>,
    /// Authenticate with Kerberos (SASL GSSAPI) with this process's Kerberos credentials: the
    /// ticket in the credential cache (KRB5CCNAME; kinit makes it), else the client keytab
    /// (KRB5_CLIENT_KTNAME); KRB5_CONFIG names the krb5.conf. The servers know the client as
    /// sasl:<principal>. Any --kerberos-* option implies it.
    #[arg(
        long,
        env = "ZKL_KERBEROS",
        value_parser = clap::builder::FalseyValueParser::new(),
        help_heading = "Secured ensembles"
    )]
    kerberos: bool,
    /// The principal the Kerberos credentials must be for (alice@EXAMPLE.COM): others are
    /// refused before connecting.
    #[arg(
        long,
        value_name = "PRINCIPAL",
        env = "ZKL_KERBEROS_PRINCIPAL",
        help_heading = "Secured ensembles"
    )]
    kerberos_principal: Option<String>,
    /// The service of the servers' Kerberos principal (default zookeeper).
    #[arg(
        long,
        value_name = "SERVICE",
        env = "ZKL_KERBEROS_SERVICE",
        help_heading = "Secured ensembles"
    )]
    kerberos_service: Option<String>,
    /// The host of every server's Kerberos principal (default: each server's host as --hosts
    /// names it).
    #[arg(
        long,
        value_name = "HOST",
        env = "ZKL_KERBEROS_HOST",
        help_heading = "Secured ensembles"
    )]
    kerberos_host: Option<String>,
    /// Add ZooKeeper digest authentication as USER (addauth digest USER:PASSWORD); the servers
    /// know the client as digest:USER. The password comes from --digest-password-file, else the
    /// environment's ZKL_DIGEST_PASSWORD. Digest sends the password in clear at every connect:
    /// prefer SASL, or TLS.
    #[arg(
        long,
        value_name = "USER",
        env = "ZKL_DIGEST_USER",
        help_heading = "Secured ensembles"
    )]
    digest_user: Option<String>,
    /// A file holding --digest-user's password (one trailing newline is stripped).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_DIGEST_PASSWORD_FILE",
        help_heading = "Secured ensembles"
    )]
    digest_password_file: Option<PathBuf>,
}

/// The environment variables that hold passwords: read by zklock, never passed on to COMMAND.
pub(crate) const PASSWORD_VARS: [&str; 3] = [
    "ZKL_SASL_PASSWORD",
    "ZKL_DIGEST_PASSWORD",
    "ZKL_TLS_KEY_PASSWORD",
];

/// A password: the content of `file` (one trailing newline stripped) when one is named, else
/// the environment variable `var`, else None. `Err`: the usage error.
fn password(file: Option<&Path>, var: &str) -> Result<Option<String>, String> {
    if let Some(f) = file {
        let mut pw = std::fs::read_to_string(f)
            .map_err(|e| format!("cannot read the password file {}: {e}", f.display()))?;
        if pw.ends_with('\n') {
            pw.pop();
            if pw.ends_with('\r') {
                pw.pop();
            }
        }
        return Ok(Some(pw));
    }
    Ok(std::env::var(var).ok())
}

impl Secure {
    /// `opts` with the TLS and credentials asked for. `Err`: the usage error, said in words
    /// that tell where a missing piece goes.
    pub(crate) fn apply(&self, mut opts: Options) -> Result<Options, String> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(
                "--tls-cert and --tls-key go together (a certificate and its private \
                 key; or ZKL_TLS_CERT and ZKL_TLS_KEY)"
                    .into(),
            );
        }
        if self.tls_key_password_file.is_some() && self.tls_key.is_none() {
            return Err("--tls-key-password-file is the password of --tls-key, not given".into());
        }
        if self.tls || self.tls_ca.is_some() || self.tls_cert.is_some() {
            let mut tls = Tls::new();
            if let Some(ca) = &self.tls_ca {
                tls = tls.ca_file(ca);
            }
            if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
                tls = tls.identity_files(cert, key);
                let pw = password(
                    self.tls_key_password_file.as_deref(),
                    "ZKL_TLS_KEY_PASSWORD",
                )?;
                match pw {
                    Some(pw) => tls = tls.key_password(pw),
                    // Said here in the command's words (the library reads the key at connect).
                    None if std::fs::read_to_string(key)
                        .is_ok_and(|k| k.contains("ENCRYPTED PRIVATE KEY")) =>
                    {
                        return Err(format!(
                            "the key {} is encrypted: put its password in a file named by \
                             --tls-key-password-file (or ZKL_TLS_KEY_PASSWORD_FILE), or in the \
                             environment variable ZKL_TLS_KEY_PASSWORD",
                            key.display()
                        ));
                    }
                    None => {}
                }
            }
            opts = opts.tls(tls);
        }
        let kerberos = self.kerberos
            || self.kerberos_principal.is_some()
            || self.kerberos_service.is_some()
            || self.kerberos_host.is_some();
        if kerberos && self.sasl_user.is_some() {
            return Err(
                "--kerberos and --sasl-user: one SASL mechanism or the other (Kerberos, or \
                 DIGEST-MD5)"
                    .into(),
            );
        }
        if kerberos {
            let mut gssapi = Sasl::gssapi();
            for (flag, value) in [
                ("--kerberos-principal", &self.kerberos_principal),
                ("--kerberos-service", &self.kerberos_service),
                ("--kerberos-host", &self.kerberos_host),
            ] {
                match value.as_deref() {
                    Some("") => return Err(format!("{flag} is empty")),
                    Some(v) if flag == "--kerberos-principal" => gssapi = gssapi.principal(v),
                    Some(v) if flag == "--kerberos-service" => gssapi = gssapi.service(v),
                    Some(v) => gssapi = gssapi.host(v),
                    None => {}
                }
            }
            opts = opts.sasl(gssapi);
        }
        if let Some(user) = self.user("--sasl-user", &self.sasl_user)? {
            let pw = password(self.sasl_password_file.as_deref(), "ZKL_SASL_PASSWORD")?
                .ok_or_else(|| missing("--sasl-user", user, "SASL"))?;
            opts = opts.sasl(Sasl::digest_md5(user, pw));
        } else if self.sasl_password_file.is_some() {
            return Err("--sasl-password-file without --sasl-user (or ZKL_SASL_USER)".into());
        }
        if let Some(user) = self.user("--digest-user", &self.digest_user)? {
            if user.contains(':') {
                return Err(format!(
                    "--digest-user {user:?}: a digest user has no ':' in it"
                ));
            }
            let pw = password(self.digest_password_file.as_deref(), "ZKL_DIGEST_PASSWORD")?
                .ok_or_else(|| missing("--digest-user", user, "DIGEST"))?;
            opts = opts.auth("digest", format!("{user}:{pw}"));
        } else if self.digest_password_file.is_some() {
            return Err("--digest-password-file without --digest-user (or ZKL_DIGEST_USER)".into());
        }
        Ok(opts)
    }

    /// A user given to `flag`, refused when empty.
    fn user<'a>(&self, flag: &str, user: &'a Option<String>) -> Result<Option<&'a str>, String> {
        match user.as_deref() {
            Some("") => Err(format!("{flag}: the user name is empty")),
            u => Ok(u),
        }
    }
}

/// The usage error of a user without a password: where to put it.
fn missing(flag: &str, user: &str, what: &str) -> String {
    let lower = what.to_lowercase();
    format!(
        "{flag} {user} needs a password: put it in a file named by --{lower}-password-file \
         (or ZKL_{what}_PASSWORD_FILE), or in the environment variable ZKL_{what}_PASSWORD; \
         never on the command line, where ps shows it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argv::subcommand_first;
    use crate::cli::tests::parse;
    use crate::cli::AclArg;

    #[test]
    fn secure_flags_take_files_never_passwords() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\n").unwrap();
        let pw = pw.to_str().unwrap();
        let c = parse(&[
            "--tls-ca",
            "ca.pem",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "c.key",
            "--sasl-user",
            "bob",
            "--sasl-password-file",
            pw,
            "--digest-user",
            "app",
            "--digest-password-file",
            pw,
            "--acl",
            "creator-read",
            "/p",
            "true",
        ])
        .unwrap();
        let sec = &c.run.conn.secure;
        assert_eq!(sec.tls_ca.as_deref(), Some(Path::new("ca.pem")));
        assert_eq!(sec.sasl_user.as_deref(), Some("bob"));
        assert_eq!(c.run.conn.acl, AclArg::CreatorRead);
        let opts = format!("{:?}", sec.apply(Options::default()).unwrap());
        // The options carry TLS, SASL and digest, and print no password.
        assert!(opts.contains("ca.pem") && opts.contains("bob"), "{opts}");
        assert!(opts.contains("digest:<redacted>"), "{opts}");
        assert!(!opts.contains("s3cret"), "{opts}");
        // One trailing newline is stripped, and only one.
        assert_eq!(
            password(Some(Path::new(pw)), "ZKL_NO_SUCH_VAR").unwrap(),
            Some("s3cret".into())
        );
        let two = dir.path().join("two");
        std::fs::write(&two, "a b\r\n\n").unwrap();
        assert_eq!(password(Some(&two), "X").unwrap(), Some("a b\r\n".into()));
        // No option takes a password itself.
        for flag in [
            "--sasl-password",
            "--digest-password",
            "--tls-key-password",
            "--password",
        ] {
            assert!(parse(&[flag, "x", "/p", "true"]).is_err(), "{flag}");
        }
        // Usage errors that say where a missing piece goes.
        let err = |v: &[&str]| {
            parse(v)
                .unwrap()
                .run
                .conn
                .secure
                .apply(Options::default())
                .unwrap_err()
        };
        let e = err(&[
            "--sasl-user",
            "bob",
            "--sasl-password-file",
            "/nonexistent/pw",
            "/p",
            "true",
        ]);
        assert!(e.contains("/nonexistent/pw"), "{e}");
        let e = err(&["--tls-cert", "c.pem", "/p", "true"]);
        assert!(e.contains("--tls-key"), "{e}");
        let e = err(&["--sasl-password-file", pw, "/p", "true"]);
        assert!(e.contains("--sasl-user"), "{e}");
        let e = err(&[
            "--digest-user",
            "a:b",
            "--digest-password-file",
            pw,
            "/p",
            "true",
        ]);
        assert!(e.contains("':'"), "{e}");
        // A value that happens to be a subcommand's name stays a value.
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let argv = v(&["zklock", "--sasl-user", "holders", "/p", "true"]);
        assert_eq!(subcommand_first(argv.clone()), argv);
    }
}
