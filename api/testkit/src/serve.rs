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
