//! Chain adapters: what the pipeline asks of a network (tip height, transfers in a block
//! range, the status of a seen transfer) and what the executor sends to it. The test
//! environment runs on sandbox chains kept in the database; live adapters plug in behind the
//! same trait. Address rules are the shared domain's (`domain::chain::address`).
//!
//! [`Chains`] maps (environment, gate) to an adapter, built from the one list of live families
//! (`families`). Live adapters: `evm` (`[evm.networks.<network>]`), `bitcoin`, `tron`, `solana`
//! and `xrp` (the operator account's `account_tx`, told apart by destination tag), each at a cost
//! that does not grow with the number of watched addresses (docs/operations.md for each).
//! Bitcoin also reads its mempool (`Chain::pending`: recorded with 0 confirmations and no block
//! until a scan reads it in one). A transfer's depth is what `Chain::status` reports: blocks from
//! its own to the tip (`Chain::depth_counts_blocks`), except Solana's, whose depth is finality (0
//! until `finalized`, then the gate's 1). A transaction with a validity window (XRP's
//! `LastLedgerSequence`, TRON's expiration, Solana's blockhash) that expired unseen is reported
//! by `Chain::outgoing` as `Outgoing::Expired`; a failure in a block is reported only once that
//! block is at the gate's depth ([`settled_failure`]).

pub mod bitcoin;
pub mod evm;
pub mod families;
mod retry;
pub mod sandbox;
pub mod signer;
pub mod solana;
pub mod tron;
pub mod xrp;

use std::collections::HashMap;
use std::sync::Arc;

use entity::Environment;
use rust_decimal::Decimal;

use domain::gates::{GATES, Gate};

/// A transfer to some address, as the chain reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    pub tx_hash: String,
    /// Output index (UTXO chains) or log index (EVM tokens); 0 where a transaction pays once.
    pub output_index: i64,
    /// `<family>:<address>:<tag>` of the receiver, as `addresses::address_key` builds it.
    pub address_key: String,
    pub amount: Decimal,
    pub block_height: u64,
}

/// One transfer the tracker asks the chain about ([`Chain::statuses`]).
#[derive(Debug, Clone, Copy)]
pub struct Look<'a> {
    pub tx_hash: &'a str,
    pub output_index: i64,
    /// The block (ledger, slot) it was recorded in; `None`: not in a block when seen.
    pub seen_at: Option<u64>,
}

/// Looks of one batch in flight at once where an adapter asks them one by one.
pub const LOOKS_AT_ONCE: usize = 8;

/// Where a seen transfer stands on the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStatus {
    /// On the canonical chain with this many confirmations (0: not in a block yet).
    Confirmations(u64),
    /// No longer on the chain: reorganised away, replaced or reversed.
    Gone,
}

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("chain unavailable: {0}")]
    Unavailable(String),
    /// The payout can never be paid as asked, found out before anything was signed (a Solana
    /// destination that is a token account, not a wallet): the executor fails the payout and
    /// releases its funds.
    #[error("refused: {0}")]
    Refused(String),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// A signed outgoing transaction, ready to broadcast; `raw` is what the network takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    pub tx_hash: String,
    pub raw: String,
}

/// What the network said to a broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broadcast {
    /// Taken into the mempool (or a block).
    Accepted,
    /// The same transaction was already sent: nothing new happened.
    AlreadyKnown,
    /// Refused before it reached any mempool for a reason that can pass (no gas funds, fee
    /// below the market, pool full, …): keep the signed transaction and send it again later.
    Retry(String),
    /// Its nonce was used by another transaction, now at the gate's confirmation depth: it can
    /// never be mined, and leaves no gap.
    Displaced(String),
    /// Refused for good: it can certainly never be mined (invalid destination or signature,
    /// wrong chain, intrinsic gas too low, …).
    Rejected(String),
}

/// Where an outgoing transaction stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// The network does not know it (never broadcast, or dropped from the mempool).
    Unknown,
    /// In a block with this many confirmations (0: in the mempool) and the fee it paid in the
    /// gate's asset; `None` when the fee is paid in another asset (an ERC-20 transfer pays gas
    /// in the network's coin): the payout keeps its configured fee.
    Confirmations { confirmations: u64, fee: Option<Decimal> },
    /// Mined but failed (e.g. a reverted token transfer) in a block at the gate's depth (see
    /// [`settled_failure`]), or replaced.
    Failed(String),
    /// Never in a block, and now it never can be: its validity window passed (an XRP
    /// `LastLedgerSequence`, a Solana blockhash, a TRON expiration), the node holds that window
    /// and says it searched it all, and the nonce it carries (if any) is still unused. The
    /// executor signs the payout again with the same nonce; the old transaction can never
    /// enter the chain, so the payout is still paid at most once.
    Expired,
}

/// A payout transaction that failed in a block `confirmations` deep: `Failed` once that block
/// is at the gate's confirmation depth, else still waiting (a reorganisation may put the same
/// transaction into another block, on other state, where it succeeds; failing the payout then
/// would release funds that were paid). A waiting failure is never counted as confirmed.
pub fn settled_failure(confirmations: u64, gate: &Gate, reason: impl Into<String>) -> Outgoing {
    let required = u64::from(gate.confirmations).max(1);
    if confirmations >= required {
        Outgoing::Failed(reason.into())
    } else {
        Outgoing::Confirmations { confirmations, fee: None }
    }
}

/// One gate's view of its network.
#[async_trait::async_trait]
pub trait Chain: Send + Sync {
    fn gate(&self) -> &'static Gate;
    /// Height of the newest block.
    async fn tip(&self) -> Result<u64, ChainError>;
    /// Every transfer of the gate's asset in blocks `from..=to`; the scanner picks the watched ones.
    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError>;
    /// Transfers not in a block yet (the mempool), with `block_height` the next block's
    /// (`tip + 1`, so they count 0 confirmations); none, without asking the node, where the
    /// adapter does not read a mempool.
    async fn pending(&self) -> Result<Vec<Transfer>, ChainError> {
        Ok(Vec::new())
    }
    /// Whether every transfer [`Chain::transfers`] returns was sent to an address of ours (XRP
    /// reads only the operator's own account): one that matches no invoice is then money nobody
    /// is credited for, recorded as an unclaimed deposit. False where a block holds everyone's
    /// transfers.
    fn transfers_are_ours(&self) -> bool {
        false
    }
    /// Confirmations of a transfer recorded in block (ledger, slot) `seen_at` (`None`: not in
    /// a block when seen), or `Gone`. The depth counts blocks from the transfer's own to the tip
    /// ([`Chain::depth_counts_blocks`]) except where the chain's answer is finality (Solana: 0
    /// until `finalized`, then the gate's confirmations and never more); the tracker watches a
    /// confirmed payment up to its gate's `pipeline::final_depth` of this count, then stops. "Unknown to the node" is `Gone` only from a node that
    /// holds that block's history (a pruned or lagging node answers an error, retried): an
    /// adapter whose nodes may keep part of the history asks within `seen_at`.
    async fn status(&self, tx_hash: &str, output_index: i64, seen_at: Option<u64>) -> Result<TxStatus, ChainError>;
    /// [`Chain::status`] of several transfers, each answer in the place of its look (a failed
    /// look fails alone). By default each is asked on its own, [`LOOKS_AT_ONCE`] in flight; an
    /// adapter that can answer many in one request overrides it.
    async fn statuses(&self, looks: &[Look<'_>]) -> Vec<Result<TxStatus, ChainError>> {
        let mut answers = Vec::with_capacity(looks.len());
        for part in looks.chunks(LOOKS_AT_ONCE) {
            let asked = part.iter().map(|l| self.status(l.tx_hash, l.output_index, l.seen_at));
            answers.extend(futures::future::join_all(asked).await);
        }
        answers
    }
    /// What `address` (a plain address of the gate's family, no tag) holds on chain in the
    /// gate's asset, in whole units (a token gate: the token; Solana USDC: the owner's associated
    /// token account), counting only what is in blocks (confirmed at least once; never the
    /// mempool). An address the chain has never seen holds 0. By default an error: every live
    /// adapter and the sandbox answer it.
    async fn balance(&self, address: &str) -> Result<Decimal, ChainError> {
        let _ = address;
        Err(ChainError::Unavailable(format!("balance reads are not supported on {}", self.gate().id)))
    }
    /// [`Chain::balance`] of several addresses, each answer in its address's place (a failed
    /// read fails alone). By default each is asked on its own, [`LOOKS_AT_ONCE`] in flight (like
    /// [`Chain::statuses`]); an adapter that can answer many in one request overrides it
    /// (Bitcoin: one `scantxoutset` over every address's output script).
    async fn balances(&self, addresses: &[&str]) -> Vec<Result<Decimal, ChainError>> {
        let mut answers = Vec::with_capacity(addresses.len());
        for part in addresses.chunks(LOOKS_AT_ONCE) {
            answers.extend(futures::future::join_all(part.iter().map(|a| self.balance(a))).await);
        }
        answers
    }
    /// When the next block is due, where the adapter knows it (the sandbox's blocks are timed):
    /// the scanner then looks right after it instead of at its next poll. `None` (the default,
    /// every live chain): the scanner polls every `pipeline.scan_interval_ms`.
    async fn next_block_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        None
    }
    /// Whether [`Chain::status`] counts a transfer's confirmations as the blocks from its own to
    /// the tip (`tip - height + 1`): the scanner then records a transfer read in block `height`
    /// at that depth without asking (0 for one not in a block yet). False where the depth is a
    /// finality only the node can tell (Solana's commitment): the scanner records 0 and the
    /// tracker asks.
    fn depth_counts_blocks(&self) -> bool {
        true
    }
    /// Whether one `Gone` answer is final. False for any chain read from a remote node (a
    /// lagging node or a reorganisation can hide a transaction for a while): the tracker then
    /// reverses only after the transaction stayed missing over a span of blocks. True only
    /// where `Gone` is a stored fact (the sandbox's deliberate reversals).
    fn gone_is_final(&self) -> bool {
        false
    }
    /// Blocks (slots) a transaction must stay missing before the tracker reverses its payment
    /// (`[pipeline] gone_after_blocks` overrides it): by default the gate's confirmation depth.
    fn gone_span(&self) -> u64 {
        u64::from(self.gate().confirmations)
    }
    /// Sends a signed transaction. Sending the same one again is `AlreadyKnown`, never a
    /// second transaction.
    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        let _ = tx;
        Err(ChainError::Unavailable(format!("payouts are not supported on {} yet", self.gate().id)))
    }
    /// Where a sent transaction stands (`tx` as signed: some chains read its validity window).
    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        let _ = tx;
        Err(ChainError::Unavailable(format!("payouts are not supported on {} yet", self.gate().id)))
    }
    /// `Some(why)` when payout transaction `tx` can provably never be mined, so an operator may
    /// end its payout (`ops payouts fail`): by default when [`Chain::outgoing`] says it expired
    /// past its validity window unseen (TRON, Solana, XRP) or failed at the gate's depth. EVM
    /// adds a nonce used by another transaction at depth (replaced), Bitcoin an input spent by
    /// another transaction at depth (double-spent). `None`: it may still be mined (or was).
    async fn dead(&self, tx: &SignedTx) -> Result<Option<String>, ChainError> {
        Ok(match self.outgoing(tx).await? {
            Outgoing::Expired => {
                Some("expired unseen: its validity window passed and the node searched all of it".into())
            }
            Outgoing::Failed(reason) => Some(format!("failed on chain: {reason}")),
            Outgoing::Unknown | Outgoing::Confirmations { .. } => None,
        })
    }
}

/// The chain of every (environment, gate) the pipeline can watch.
#[derive(Clone, Default)]
pub struct Chains {
    by_gate: HashMap<(Environment, &'static str), Arc<dyn Chain>>,
}

impl Chains {
    /// Sandbox chains for every test gate; live gates get adapters when configured.
    pub fn new(db: &sea_orm::DatabaseConnection, sandbox: &domain::config::SandboxConfig) -> Chains {
        let mut by_gate: HashMap<(Environment, &'static str), Arc<dyn Chain>> = HashMap::new();
        for gate in GATES.iter() {
            let chain = sandbox::SandboxChain::new(db.clone(), gate, sandbox.interval_ms(gate.id));
            by_gate.insert((Environment::Test, gate.id), Arc::new(chain));
        }
        Chains { by_gate }
    }

    /// Adds the live EVM chains configured in `cfg` (`[evm.networks.*]`).
    pub fn with_evm(mut self, cfg: &domain::config::EvmConfig) -> Chains {
        for chain in evm::chains(cfg) {
            self.insert(Environment::Live, chain);
        }
        self
    }

    pub fn insert(&mut self, env: Environment, chain: Arc<dyn Chain>) {
        self.by_gate.insert((env, chain.gate().id), chain);
    }

    pub fn get(&self, env: Environment, gate_id: &str) -> Option<Arc<dyn Chain>> {
        let gate = domain::gates::find(gate_id)?;
        self.by_gate.get(&(env, gate.id)).cloned()
    }

    /// Every watched (environment, chain), in a stable order.
    pub fn all(&self) -> Vec<(Environment, Arc<dyn Chain>)> {
        let mut v: Vec<_> = self.by_gate.iter().map(|((e, _), c)| (*e, c.clone())).collect();
        v.sort_by_key(|(e, c)| (e.as_str(), c.gate().id));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_final_only_at_the_gates_depth_and_never_counts_as_confirmed() {
        let gate = domain::gates::find("tron_usdt").unwrap(); // 19 confirmations
        for depth in [1, 18] {
            match settled_failure(depth, gate, "REVERT") {
                Outgoing::Confirmations { confirmations, fee: None } => assert!(confirmations < 19, "{depth}"),
                other => panic!("{depth}: {other:?}"),
            }
        }
        assert_eq!(settled_failure(18, gate, "x"), Outgoing::Confirmations { confirmations: 18, fee: None });
        assert_eq!(settled_failure(19, gate, "REVERT"), Outgoing::Failed("REVERT".into()));
        let xrp = domain::gates::find("xrp").unwrap(); // 1: a validated ledger is final
        assert_eq!(settled_failure(1, xrp, "tec"), Outgoing::Failed("tec".into()));
    }
}
