//! Two jobs on one payout, interleaved (the poller re-enqueues a payout not looked at lately,
//! so two executors may hold it at once): a stale executor is parked at its next chain read
//! (`outgoing`) or fee read (`fees`, then refused) while another executor moves the payout on;
//! released, it answers about the transaction it read before. Wraps a live chain and a live
//! signer, delegating everything else.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use entity::Environment;
use tokio::sync::Notify;
use workers::chain::signer::{Fees, Funding, NonceAccount, PayoutTx, Signer};
use workers::chain::{Broadcast, Chain, ChainError, Look, Outgoing, SignedTx, Transfer, TxStatus};
use workers::executor::Executor;

/// Where the stale executor stops: armed once, it parks the first caller until released.
#[derive(Default)]
pub struct Stop {
    armed: AtomicBool,
    parked: Notify,
    release: Notify,
}

impl Stop {
    pub fn armed() -> Arc<Stop> {
        let s = Stop::default();
        s.armed.store(true, Ordering::SeqCst);
        Arc::new(s)
    }

    async fn pass(&self) {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.parked.notify_one();
            self.release.notified().await;
        }
    }

    /// Waits until a caller is parked here.
    pub async fn parked(&self) {
        self.parked.notified().await;
    }

    pub fn release(&self) {
        self.release.notify_one();
    }
}

/// `inner`, parking its first `outgoing` at `stop`.
pub struct ParkedChain {
    pub inner: Arc<dyn Chain>,
    pub stop: Arc<Stop>,
}

#[async_trait::async_trait]
impl Chain for ParkedChain {
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
        self.inner.status(tx_hash, output_index, seen_at).await
    }
    async fn statuses(&self, looks: &[Look<'_>]) -> Vec<Result<TxStatus, ChainError>> {
        self.inner.statuses(looks).await
    }
    async fn next_block_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.inner.next_block_at().await
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
        self.stop.pass().await;
        self.inner.outgoing(tx).await
    }
    async fn dead(&self, tx: &SignedTx) -> Result<Option<String>, ChainError> {
        self.inner.dead(tx).await
    }
}

/// `inner`, whose fee reads park at `stop` (when armed) and are then refused for good: what a
/// node answers when the payout can never be paid as asked.
pub struct RefusingSigner {
    pub inner: Arc<dyn Signer>,
    pub stop: Arc<Stop>,
}

#[async_trait::async_trait]
impl Signer for RefusingSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        self.inner.sign(tx).await
    }
    async fn fees(&self, _tx: &PayoutTx<'_>) -> Result<Option<Fees>, ChainError> {
        self.stop.pass().await;
        Err(ChainError::Refused("the node refused the payout's terms".into()))
    }
    fn signed_terms(&self, raw: &str) -> Option<(u64, Fees)> {
        self.inner.signed_terms(raw)
    }
    async fn replacement_fees(&self, original: Fees) -> Result<Fees, ChainError> {
        self.inner.replacement_fees(original).await
    }
    async fn sign_replacement(&self, nonce: u64, fees: Fees) -> Result<SignedTx, ChainError> {
        self.inner.sign_replacement(nonce, fees).await
    }
    async fn nonce_account(&self) -> Result<Option<NonceAccount>, ChainError> {
        self.inner.nonce_account().await
    }
    async fn funding(&self) -> Result<Option<Funding>, ChainError> {
        self.inner.funding().await
    }
    fn spends(&self, raw: &str) -> Vec<String> {
        self.inner.spends(raw)
    }
}

/// A stale executor: `executor` whose live `gate` chain parks at `chain_stop` (if given) before
/// its first `outgoing`, and whose signer parks at `fee_stop` (if given) and refuses every fee
/// read.
pub fn stale(executor: &Executor, gate: &str, chain_stop: Option<Arc<Stop>>, fee_stop: Option<Arc<Stop>>) -> Executor {
    let mut e = executor.clone();
    let g = domain::gates::find(gate).expect("a gate");
    let chain = e.chains.get(Environment::Live, gate).expect("a live chain");
    let signer = e.signers.get(Environment::Live, gate).expect("a live signer");
    e.chains.insert(
        Environment::Live,
        Arc::new(ParkedChain { inner: chain, stop: chain_stop.unwrap_or_else(|| Arc::new(Stop::default())) }),
    );
    e.signers.insert(
        Environment::Live,
        g,
        Arc::new(RefusingSigner { inner: signer, stop: fee_stop.unwrap_or_else(|| Arc::new(Stop::default())) }),
    );
    e
}
