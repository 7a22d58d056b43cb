//! `webhook-deliverer`: the stage in `workers/src/deliverer` (rules and jobs) in its own process (`workers::process`).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    workers::process::main(workers::stages::Stage::WebhookDeliverer).await
}
