//! `ops bench-evm-scan` on a tiny chain (3 blocks, 60 transfers), blocks served by the recorded
//! replay: every transfer is recorded as a payment at both watched counts (the benchmark fails
//! otherwise) and the CPU figures are printed: the scanner's own per transfer, the replay's and
//! PostgreSQL's apart. Needs anvil (`$ANVIL_BIN`, else `anvil` on `PATH`; npm
//! `@foundry-rs/anvil-linux-amd64`): a missing anvil fails the test, it is never skipped. The
//! PostgreSQL server at `PAYGATE_TEST_PG` (default postgres://postgres@127.0.0.1:5432).

use std::process::Command;

#[test]
fn a_replayed_scan_records_every_transfer_and_prints_the_cpu_per_transfer() {
    let anvil = std::env::var("ANVIL_BIN").unwrap_or_else(|_| "anvil".into());
    let version = Command::new(&anvil).arg("--version").output();
    assert!(
        version.as_ref().is_ok_and(|o| o.status.success()),
        "anvil does not run ({anvil}): {version:?}; install with `npm install @foundry-rs/anvil-linux-amd64` and set ANVIL_BIN"
    );
    let pg = std::env::var("PAYGATE_TEST_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let dir = tempfile::tempdir().unwrap();
    // Watched counts no real benchmark run uses: the scratch databases are named after them.
    let out = Command::new(env!("CARGO_BIN_EXE_ops"))
        .args(["bench-evm-scan", "--anvil", &anvil, "--pg", &pg])
        .args(["--blocks", "3", "--transfers", "60", "--watched", "61,127", "--batch", "2"])
        .current_dir(dir.path())
        .env("RUST_LOG", "error")
        .output()
        .expect("run ops");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bench-evm-scan failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("anvil stopped, blocks served from memory by the replay process"), "{stdout}");
    for watched in ["61", "127"] {
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(watched))
            .unwrap_or_else(|| panic!("no row for {watched} watched in {stdout}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        // watched, blocks, transfers, …, then the CPU µs per transfer: scanner, replay, PostgreSQL.
        assert_eq!(cells.get(2), Some(&"60"), "every transfer scanned: {row}");
        let cpu = row.split_once("CPU µs/transfer:").map(|(_, c)| c.split_whitespace().collect::<Vec<_>>());
        let cpu = cpu.unwrap_or_else(|| panic!("no CPU figures: {row}"));
        assert_eq!(cpu.len(), 3, "{row}");
        // Figures, not `n/a` (a run this short may round to 0 at the clock tick).
        cpu[0].parse::<f64>().unwrap_or_else(|e| panic!("scanner CPU {:?}: {e}", cpu[0]));
        cpu[1].parse::<f64>().unwrap_or_else(|e| panic!("replay CPU {:?}: {e}", cpu[1]));
        cpu[2].parse::<f64>().unwrap_or_else(|e| panic!("PostgreSQL CPU {:?}: {e}", cpu[2]));
    }
    assert!(stdout.contains("scanner CPU per transfer, worst"), "{stdout}");
}
