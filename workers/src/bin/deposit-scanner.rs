//! `deposit-scanner`: the stage in `workers/src/scanner` (rules and jobs) in its own process (`workers::process`).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    workers::process::main(workers::stages::Stage::DepositScanner).await
}
