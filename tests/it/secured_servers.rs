//! The secured test servers of `zklock::testing` (issue 27), checked with the raw
//! `zookeeper-client` crate (not zklock's session): a TLS-only server with and without client
//! certificates, a SASL DIGEST-MD5 server, a three-member ensemble with TLS client ports, and
//! the certificates they use. Each test starts its own JVMs (about a second each).

use std::time::{Duration, Instant};

use crate::common::ThreadSpawner;
use zklock::testing::{eventually, ClientAuth, TestingCerts, TestingCluster, TestingServer};
use zookeeper_client as zk;

/// How long a refused connect may take: the refusals must come well within it.
const FAIL_WITHIN: Duration = Duration::from_secs(15);

/// Connects a raw zookeeper-client session (6 s session timeout; gives up once every host
/// was tried).
fn connect(
    hosts: &str,
    tls: Option<zk::TlsOptions>,
    sasl: Option<zk::SaslOptions>,
) -> Result<zk::Client, zk::Error> {
    let _scope = spawns_core::enter(&ThreadSpawner);
    let mut c = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(6))
        .with_fail_eagerly();
    if let Some(tls) = tls {
        c = c.with_tls(tls);
    }
    if let Some(sasl) = sasl {
        c = c.with_sasl(sasl);
    }
    futures::executor::block_on(c.connect(hosts))
}

/// TLS options trusting `ca`, presenting `identity` if given.
fn tls(ca: &str, identity: Option<&zklock::testing::ClientCert>) -> zk::TlsOptions {
    let mut o = zk::TlsOptions::new().with_pem_ca(ca).unwrap();
    if let Some(id) = identity {
        o = o.with_pem_identity(id.cert_pem(), id.key_pem()).unwrap();
    }
    o
}

/// A connect that must fail: returns its error, having checked it came within [`FAIL_WITHIN`].
fn refused(
    what: &str,
    hosts: &str,
    tls: Option<zk::TlsOptions>,
    sasl: Option<zk::SaslOptions>,
) -> zk::Error {
    let start = Instant::now();
    let res = connect(hosts, tls, sasl);
    let took = start.elapsed();
    let err = match res {
        Ok(c) => panic!("{what}: connected (session {})", c.session_id()),
        Err(e) => e,
    };
    eprintln!("{what}: {err:?} after {took:?}");
    assert!(took < FAIL_WITHIN, "{what}: refused only after {took:?}");
    err
}

/// Creates `path` with `data` and reads it back; returns the session's identities
/// (`scheme:user`, ZooKeeper's whoami).
fn create_and_whoami(client: &zk::Client, path: &str, data: &[u8]) -> Vec<String> {
    let _scope = spawns_core::enter(&ThreadSpawner);
    futures::executor::block_on(async {
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client.create(path, data, &opts).await.unwrap();
        let (got, _) = client.get_data(path).await.unwrap();
        assert_eq!(got, data);
        client
            .list_auth_users()
            .await
            .unwrap()
            .iter()
            .map(|u| format!("{}:{}", u.scheme(), u.user()))
            .collect()
    })
}

#[test]
fn certificates_are_files_and_each_generate_is_a_new_ca() {
    let certs = TestingCerts::generate().unwrap();
    assert_eq!(certs.server_names(), ["127.0.0.1", "localhost"]);
    assert_eq!(
        std::fs::read_to_string(certs.ca_path()).unwrap(),
        certs.ca_pem()
    );
    let store = std::fs::read_to_string(certs.server_store_path()).unwrap();
    assert!(store.starts_with("-----BEGIN PRIVATE KEY-----"), "{store}");
    assert!(store.contains(certs.server().cert_pem()));
    let a = certs.client("alice").unwrap();
    let a2 = certs.client("alice").unwrap();
    assert_eq!(a.common_name(), "alice");
    assert_ne!(a.cert_path(), a2.cert_path(), "a file per call");
    assert_ne!(a.key_pem(), a2.key_pem(), "a key per call");
    assert_eq!(std::fs::read_to_string(a.key_path()).unwrap(), a.key_pem());
    assert_eq!(
        std::fs::read_to_string(a.cert_path()).unwrap(),
        a.cert_pem()
    );
    let other = TestingCerts::generate().unwrap();
    assert_ne!(other.ca_pem(), certs.ca_pem());
    // The files live as long as a clone does.
    let dir = certs.dir().to_path_buf();
    let clone = certs.clone();
    drop(certs);
    assert!(dir.exists());
    drop(clone);
    assert!(!dir.exists());
}

#[test]
fn mutual_tls_server_serves_only_clients_with_a_certificate_of_its_ca() {
    let start = Instant::now();
    let server = TestingServer::start_tls(ClientAuth::Need).unwrap();
    eprintln!("TLS server (need) started in {:?}", start.elapsed());
    let hosts = server.connect_string();
    assert_eq!(hosts, format!("tcp+tls://127.0.0.1:{}", server.port()));
    assert_eq!(server.client_auth(), Some(ClientAuth::Need));
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    assert!(server
        .four_letter("srvr")
        .unwrap()
        .contains("Mode: standalone"));
    let certs = server.certs().unwrap();

    let alice = certs.client("alice").unwrap();
    let client = connect(&hosts, Some(tls(certs.ca_pem(), Some(&alice))), None).unwrap();
    let ids = create_and_whoami(&client, "/mutual", b"alice was here");
    assert!(ids.contains(&"x509:CN=alice".to_string()), "{ids:?}");
    drop(client);

    refused(
        "no client certificate",
        &hosts,
        Some(tls(certs.ca_pem(), None)),
        None,
    );
    let stranger = TestingCerts::generate().unwrap();
    let mallory = stranger.client("mallory").unwrap();
    refused(
        "client certificate of another CA",
        &hosts,
        Some(tls(certs.ca_pem(), Some(&mallory))),
        None,
    );
    refused(
        "server certificate of an unknown CA",
        &hosts,
        Some(tls(stranger.ca_pem(), Some(&alice))),
        None,
    );
    // Plaintext to the TLS port: the server accepts TCP and never answers as ZooKeeper.
    refused("plaintext client", &server.address(), None, None);

    // Nothing but alice's node was made by the refused clients.
    let client = connect(&hosts, Some(tls(certs.ca_pem(), Some(&alice))), None).unwrap();
    let _scope = spawns_core::enter(&ThreadSpawner);
    let kids = futures::executor::block_on(client.list_children("/")).unwrap();
    let mut kids: Vec<_> = kids.into_iter().filter(|k| k != "zookeeper").collect();
    kids.sort();
    assert_eq!(kids, ["mutual"]);
}

#[test]
fn server_authenticated_tls_needs_only_the_ca() {
    let start = Instant::now();
    let server = TestingServer::start_tls(ClientAuth::None).unwrap();
    eprintln!("TLS server (none) started in {:?}", start.elapsed());
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    let certs = server.certs().unwrap();
    let client = connect(
        &server.connect_string(),
        Some(tls(certs.ca_pem(), None)),
        None,
    )
    .unwrap();
    let ids = create_and_whoami(&client, "/server-only", b"x");
    assert!(ids.iter().all(|i| !i.starts_with("x509:")), "{ids:?}");
    refused(
        "server certificate of an unknown CA",
        &server.connect_string(),
        Some(tls(TestingCerts::generate().unwrap().ca_pem(), None)),
        None,
    );
}

#[test]
fn server_certificate_for_other_names_is_refused() {
    let wrong = TestingCerts::generate_for_names(&["wrong.example"]).unwrap();
    let server = TestingServer::start_tls_with(&wrong, ClientAuth::None, &[]).unwrap();
    // The harness itself reaches it (it checks the name the certificate has).
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    assert_eq!(server.certs().unwrap().server_names(), ["wrong.example"]);
    refused(
        "name mismatch",
        &server.connect_string(),
        Some(tls(wrong.ca_pem(), None)),
        None,
    );
}

#[test]
fn sasl_server_serves_only_known_users() {
    let start = Instant::now();
    let server = TestingServer::start_sasl(&[("bob", "bobpw"), ("carol", "carolpw")]).unwrap();
    eprintln!("SASL server started in {:?}", start.elapsed());
    let hosts = server.connect_string();
    assert_eq!(hosts, server.address());
    assert!(server.certs().is_none());
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");

    let bob = connect(
        &hosts,
        None,
        Some(zk::SaslOptions::digest_md5("bob", "bobpw").into()),
    )
    .unwrap();
    let ids = create_and_whoami(&bob, "/sasl", b"bob was here");
    assert!(ids.contains(&"sasl:bob".to_string()), "{ids:?}");
    drop(bob);

    let err = refused(
        "wrong password",
        &hosts,
        None,
        Some(zk::SaslOptions::digest_md5("bob", "nope").into()),
    );
    assert_eq!(err, zk::Error::AuthFailed);
    let err = refused(
        "unknown user",
        &hosts,
        None,
        Some(zk::SaslOptions::digest_md5("mallory", "malloryspw").into()),
    );
    assert_eq!(err, zk::Error::AuthFailed);
    refused("no credentials", &hosts, None, None);
}

#[test]
fn tls_ensemble_has_a_leader_and_serves_a_tls_client() {
    let start = Instant::now();
    let cluster = TestingCluster::start_tls(3, ClientAuth::Need).unwrap();
    eprintln!("TLS ensemble started in {:?}", start.elapsed());
    let hosts = cluster.connect_string();
    let members: Vec<String> = (0..3).map(|i| cluster.member_connect_string(i)).collect();
    assert_eq!(hosts, members.join(","));
    assert!(members
        .iter()
        .all(|m| m.starts_with("tcp+tls://127.0.0.1:")));
    let leader = cluster.leader().expect("a leader");
    for i in 0..3 {
        let mode = cluster.mode(i).unwrap();
        assert_eq!(mode == "leader", i == leader, "member {i}: {mode}");
        assert_eq!(cluster.four_letter(i, "ruok").unwrap(), "imok");
    }
    let certs = cluster.certs().unwrap();
    let alice = certs.client("alice").unwrap();
    let client = connect(&hosts, Some(tls(certs.ca_pem(), Some(&alice))), None).unwrap();
    let ids = create_and_whoami(&client, "/ensemble", b"over tls");
    assert!(ids.contains(&"x509:CN=alice".to_string()), "{ids:?}");
    // Another member serves what was written through the first.
    let follower = (leader + 1) % 3;
    let other = connect(
        &cluster.member_connect_string(follower),
        Some(tls(certs.ca_pem(), Some(&alice))),
        None,
    )
    .unwrap();
    let _scope = spawns_core::enter(&ThreadSpawner);
    futures::executor::block_on(async {
        other.sync("/ensemble").await.unwrap();
        let (data, _) = other.get_data("/ensemble").await.unwrap();
        assert_eq!(data, b"over tls");
    });
    assert!(cluster.member_of_session(other.session_id().0) == Some(follower));
}

#[test]
fn partitionable_tls_ensemble_isolates_and_heals_a_member() {
    let certs = TestingCerts::generate().unwrap();
    let cluster = TestingCluster::start_tls_with(3, &certs, ClientAuth::None, true, &[]).unwrap();
    assert_eq!(cluster.client_auth(), Some(ClientAuth::None));
    let leader = cluster.leader().expect("a leader");
    let follower = (leader + 1) % 3;
    cluster.isolate(follower);
    assert!(eventually(Duration::from_secs(15), || !cluster.serving(follower)));
    cluster.heal(follower);
    assert!(eventually(Duration::from_secs(30), || cluster.serving(follower)));
    let client = connect(
        &cluster.member_connect_string(follower),
        Some(tls(certs.ca_pem(), None)),
        None,
    )
    .unwrap();
    create_and_whoami(&client, "/healed", b"x");
}

#[test]
fn tls_server_restarts_on_its_port_and_keeps_its_data() {
    let mut server = TestingServer::start_tls(ClientAuth::Need).unwrap();
    let certs = server.certs().unwrap().clone();
    let alice = certs.client("alice").unwrap();
    let client = connect(
        &server.connect_string(),
        Some(tls(certs.ca_pem(), Some(&alice))),
        None,
    )
    .unwrap();
    create_and_whoami(&client, "/kept", b"x");
    drop(client);
    server.restart().unwrap();
    let client = connect(
        &server.connect_string(),
        Some(tls(certs.ca_pem(), Some(&alice))),
        None,
    )
    .unwrap();
    let _scope = spawns_core::enter(&ThreadSpawner);
    let (data, _) = futures::executor::block_on(client.get_data("/kept")).unwrap();
    assert_eq!(data, b"x");
}
