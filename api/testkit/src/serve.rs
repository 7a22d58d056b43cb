//! `ops serve`, the embedded default, as a child process for end-to-end tests.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A child process killed (and reaped) when the test ends, passed or failed.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// `ops serve` (the binary at `ops`) in `dir`, listening on `port`, with sandbox blocks every
/// `block_interval_ms` and scans every 100 ms; the caller adds its own settings.
pub fn ops_serve(ops: &str, dir: &std::path::Path, port: u16, block_interval_ms: &str) -> Command {
    let mut cmd = Command::new(ops);
    cmd.arg("serve")
        .current_dir(dir)
        .env("PAYGATE_LISTEN", format!("127.0.0.1:{port}"))
        .env("PAYGATE_SANDBOX__BLOCK_INTERVAL_MS", block_interval_ms)
        .env("PAYGATE_PIPELINE__SCAN_INTERVAL_MS", "100")
        .env("RUST_LOG", "warn");
    cmd
}

/// Spawns `cmd` (an `ops serve` the caller configured: directory, `PAYGATE_*` settings) and
/// waits up to 60 s for the demo merchant's test key that its first start prints once. Its
/// stdout is read to the end, so the server never writes into a closed pipe.
pub async fn start_with_demo_key(mut cmd: Command) -> (KillOnDrop, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = KillOnDrop(child);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(k) = line.split_whitespace().find(|w| w.starts_with("sk_test_")) {
                let _ = tx.send(k.to_owned());
            }
        }
    });
    let key = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("ops serve printed no test key");
    (child, key)
}
