//! One real ZooKeeper server for a whole test run: prints `127.0.0.1:PORT` on stdout, then
//! serves until its standard input closes (and kills the server then).
//!
//! `scripts/run-tests.sh` starts it and hands the address to every test process as
//! `ZKLOCK_TEST_SERVER` (read by [`TestingServer::shared`]).
//!
//! ```text
//! cargo run --features testing --example testing_server
//! ```

use std::io::{Read, Write};

use zklock::testing::TestingServer;

fn main() -> std::io::Result<()> {
    let server = TestingServer::start()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", server.connect_string())?;
    out.flush()?;
    drop(out);
    // Until the starter closes our stdin (or dies): EOF or an error ends the wait alike.
    let mut sink = [0u8; 64];
    while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
    drop(server);
    Ok(())
}
