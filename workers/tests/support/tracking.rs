//! Whether the tracker still has work for a payment. A payment's tracking reaches the tracker
//! stage three ways: its own job chain (a look that schedules the next: `next_check_at` and the
//! chain token stored with it), the scanner's hand-over of the blocks that complete its next
//! milestone (`scanner::due_payments`), and the sweeper (`sweeper::sweep`, for a chain that was
//! lost). A payment whose tracking ended has none of them, so the tracker never asks the chain
//! about it again: checked by running what they list through chains that count the looks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use entity::{Environment, PaymentStatus, payment};
use sea_orm::{DatabaseConnection, EntityTrait};
use uuid::Uuid;
use workers::chain::{Broadcast, Chain, ChainError, Chains, Look, Outgoing, SignedTx, Transfer, TxStatus};
use workers::scanner;
use workers::tracker::{self, sweeper};

/// A chain that counts the looks ([`Chain::status`], [`Chain::statuses`]) at each transaction and
/// passes everything to the chain it wraps.
pub struct Counting {
    inner: Arc<dyn Chain>,
    looks: Mutex<HashMap<String, u64>>,
}

impl Counting {
    /// `chains` with `gate`'s chain in `env` counted; the counter.
    pub fn wrap(chains: &Chains, env: Environment, gate: &str) -> (Chains, Arc<Counting>) {
        let inner = chains.get(env, gate).unwrap_or_else(|| panic!("no {env} chain for {gate}"));
        let counting = Arc::new(Counting { inner, looks: Mutex::new(HashMap::new()) });
        let mut counted = chains.clone();
        counted.insert(env, counting.clone());
        (counted, counting)
    }

    /// Looks at `tx_hash` so far.
    pub fn looks_at(&self, tx_hash: &str) -> u64 {
        self.looks.lock().unwrap().get(tx_hash).copied().unwrap_or(0)
    }

    /// Looks at any transaction so far.
    pub fn looks(&self) -> u64 {
        self.looks.lock().unwrap().values().sum()
    }

    fn count(&self, tx_hash: &str) {
        *self.looks.lock().unwrap().entry(tx_hash.to_owned()).or_default() += 1;
    }
}

#[async_trait::async_trait]
impl Chain for Counting {
    fn gate(&self) -> &'static domain::gates::Gate {
        self.inner.gate()
    }
    async fn tip(&self) -> Result<u64, ChainError> {
        self.inner.tip().await
    }
    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        self.inner.transfers(from, to).await
    }
    async fn pending(&self) -> Result<Vec<Transfer>, ChainError> {
        self.inner.pending().await
    }
    fn transfers_are_ours(&self) -> bool {
        self.inner.transfers_are_ours()
    }
    async fn status(&self, tx_hash: &str, output_index: i64, seen_at: Option<u64>) -> Result<TxStatus, ChainError> {
        self.count(tx_hash);
        self.inner.status(tx_hash, output_index, seen_at).await
    }
    async fn statuses(&self, looks: &[Look<'_>]) -> Vec<Result<TxStatus, ChainError>> {
        for l in looks {
            self.count(l.tx_hash);
        }
        self.inner.statuses(looks).await
    }
    fn depth_counts_blocks(&self) -> bool {
        self.inner.depth_counts_blocks()
    }
    fn gone_is_final(&self) -> bool {
        self.inner.gone_is_final()
    }
    fn gone_span(&self) -> u64 {
        self.inner.gone_span()
    }
    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        self.inner.broadcast(tx).await
    }
    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        self.inner.outgoing(tx).await
    }
}

/// Asserts that the tracker has no work left for the confirmed payment `id`: no job chain (its
/// last look scheduled none), the sweeper lists it not even with no margin, a scan of the blocks
/// `blocks` (read after it reached its end, if any) hands it over not, and the tracker, taking
/// up whatever these list as its stage would, asks the chain nothing about it.
pub async fn assert_tracking_ended(
    db: &DatabaseConnection,
    chains: &Chains,
    cfg: &domain::config::PipelineConfig,
    id: Uuid,
    blocks: Option<std::ops::RangeInclusive<u64>>,
) {
    let p = payment::Entity::find_by_id(id).one(db).await.unwrap().expect("the payment");
    assert_eq!(p.status, PaymentStatus::Confirmed, "{p:?}");
    assert_eq!((p.next_check_at, p.track_token), (None, None), "no job and no hand-over awaited: {p:?}");
    let gate = domain::gates::find(&p.gate_id).unwrap();
    let stale = sweeper::sweep(db, Duration::ZERO).await.unwrap().stale_payments;
    assert!(!stale.contains(&id), "the sweeper takes it up again: {p:?}");
    let due = match &blocks {
        Some(b) => scanner::due_payments(db, p.environment, gate, *b.start(), *b.end()).await.unwrap(),
        None => Vec::new(),
    };
    assert!(!due.contains(&id), "a scan of blocks {blocks:?} hands it over again: {p:?}");
    let (counted, counting) = Counting::wrap(chains, p.environment, gate.id);
    let (_, failed) = tracker::track_due(db, &counted, cfg, &due).await;
    assert!(failed.is_none(), "{failed:?}");
    for other in stale {
        tracker::track_payment(db, &counted, cfg, other).await.unwrap();
    }
    assert_eq!(counting.looks_at(&p.tx_hash), 0, "the tracker asked the chain about it: {p:?}");
}
