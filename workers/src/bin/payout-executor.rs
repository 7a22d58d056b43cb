//! `payout-executor`: the stage in `workers/src/executor` (rules and jobs) in its own process (`workers::process`).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    workers::process::main(workers::stages::Stage::PayoutExecutor).await
}
