//! `settlement-converter`: one worker stage in its own process (see `workers::stages`).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    workers::process::main(workers::stages::Stage::SettlementConverter).await
}
