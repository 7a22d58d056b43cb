//! What every stage's handlers and periodic tasks start from: the [`Shared`] context (database,
//! configuration, queues, chain adapters) and [`repeat`], the loop of a periodic task. Each
//! stage's typed context (e.g. `executor::job::ExecutorCtx`) adds its own services to `Shared`;
//! `crate::stages` builds them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use domain::config::Config;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;

use crate::chain::Chains;
use crate::platform::Queues;

/// What every stage's context holds: the database, the configuration, the queues and the chain
/// adapters (watch-only; signers are the payout executor's own). The scanner and the tracker
/// need nothing more; the other stages add their own services in their own contexts
/// ([`ConverterCtx`](crate::converter::job::ConverterCtx),
/// [`ExecutorCtx`](crate::executor::job::ExecutorCtx),
/// [`DelivererCtx`](crate::deliverer::job::DelivererCtx)), built only where they run.
#[derive(Clone)]
pub struct Shared {
    pub db: DatabaseConnection,
    pub config: Arc<Config>,
    pub queues: Queues,
    pub chains: Chains,
}

impl Shared {
    pub fn new(db: DatabaseConnection, config: Arc<Config>, queues: Queues) -> Shared {
        let chains = Chains::new(&db, &config.sandbox).with_live(&config);
        Shared { db, config, queues, chains }
    }
}

/// Runs `tick`, then waits `every`, until `stop` (which also cuts the wait short).
pub(crate) async fn repeat<F, Fut>(stop: &CancellationToken, every: Duration, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    while !stop.is_cancelled() {
        tick().await;
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
}
