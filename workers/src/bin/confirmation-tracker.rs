//! `confirmation-tracker`: the stage in `workers/src/tracker` (rules and jobs) in its own process (`workers::process`).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    workers::process::main(workers::stages::Stage::ConfirmationTracker).await
}
