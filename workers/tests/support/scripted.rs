//! A chain the `pipeline` suites script block by block, standing in for a live node, and the
//! steps that drive it.

use entity::Environment;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use testkit::d;
use uuid::Uuid;

use super::steps::Pipe;

/// A chain the test scripts block by block, standing in for a live node: transfers, a tip that
/// moves only when mined, a mempool (as Bitcoin's adapter reads one), transactions the node does
/// not know (missing) and single null answers.
pub struct ScriptedChain {
    gate: &'static domain::gates::Gate,
    state: std::sync::Mutex<Script>,
}

#[derive(Default)]
pub struct Script {
    tip: u64,
    transfers: Vec<workers::chain::Transfer>,
    /// Transfers not in a block yet.
    mempool: Vec<workers::chain::Transfer>,
    missing: std::collections::HashSet<String>,
    gone_once: std::collections::HashSet<String>,
}

impl ScriptedChain {
    /// Replaces the test environment's chain of `gate` in `p`'s chains.
    pub fn install(p: &mut Pipe, gate: &str) -> std::sync::Arc<ScriptedChain> {
        let chain = ScriptedChain::new(gate);
        p.chains.insert(Environment::Test, chain.clone());
        chain
    }

    /// A scripted chain of `gate` at tip 1, for the caller to install in an environment's chains.
    pub fn new(gate: &str) -> std::sync::Arc<ScriptedChain> {
        std::sync::Arc::new(ScriptedChain {
            gate: domain::gates::find(gate).unwrap(),
            state: std::sync::Mutex::new(Script { tip: 1, ..Script::default() }),
        })
    }

    /// A transfer in a new block; returns its tx hash.
    pub fn send(&self, address_key: &str, amount: &str) -> String {
        let mut s = self.state.lock().unwrap();
        s.tip += 1;
        let tx_hash = format!("0x{}", Uuid::new_v4().simple());
        let t = workers::chain::Transfer {
            tx_hash: tx_hash.clone(),
            output_index: 0,
            address_key: address_key.to_owned(),
            amount: d(amount),
            block_height: s.tip,
        };
        s.transfers.push(t);
        tx_hash
    }

    /// A transfer into the mempool, in no block yet; returns its tx hash.
    pub fn send_to_mempool(&self, address_key: &str, amount: &str) -> String {
        let mut s = self.state.lock().unwrap();
        let tx_hash = format!("0x{}", Uuid::new_v4().simple());
        let t = workers::chain::Transfer {
            tx_hash: tx_hash.clone(),
            output_index: 0,
            address_key: address_key.to_owned(),
            amount: d(amount),
            block_height: 0,
        };
        s.mempool.push(t);
        tx_hash
    }

    /// A new block holding the mempool's transfers.
    pub fn mine_mempool(&self) {
        let mut s = self.state.lock().unwrap();
        s.tip += 1;
        let tip = s.tip;
        let mined: Vec<_> = s.mempool.drain(..).map(|t| workers::chain::Transfer { block_height: tip, ..t }).collect();
        s.transfers.extend(mined);
    }

    pub fn mine(&self, blocks: u64) {
        self.state.lock().unwrap().tip += blocks;
    }

    /// The node answers "unknown transaction" for `tx` (until `found`).
    pub fn lose(&self, tx: &str) {
        self.state.lock().unwrap().missing.insert(tx.to_owned());
    }

    /// The next status question about `tx` gets one null answer.
    pub fn null_once(&self, tx: &str) {
        self.state.lock().unwrap().gone_once.insert(tx.to_owned());
    }

    /// The node returns `tx`'s transfer a second time, in the same block (a batch holding one
    /// transfer twice).
    pub fn repeat(&self, tx: &str) {
        let mut s = self.state.lock().unwrap();
        let t = s.transfers.iter().find(|t| t.tx_hash == tx).unwrap().clone();
        s.transfers.push(t);
    }

    /// `tx` is mined again, in a new block.
    pub fn mine_again(&self, tx: &str) {
        let mut s = self.state.lock().unwrap();
        s.missing.remove(tx);
        s.tip += 1;
        let tip = s.tip;
        for t in s.transfers.iter_mut().filter(|t| t.tx_hash == tx) {
            t.block_height = tip;
        }
    }
}

#[async_trait::async_trait]
impl workers::chain::Chain for ScriptedChain {
    fn gate(&self) -> &'static domain::gates::Gate {
        self.gate
    }

    async fn tip(&self) -> Result<u64, workers::chain::ChainError> {
        Ok(self.state.lock().unwrap().tip)
    }

    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<workers::chain::Transfer>, workers::chain::ChainError> {
        let s = self.state.lock().unwrap();
        Ok(s.transfers
            .iter()
            .filter(|t| (from..=to).contains(&t.block_height) && !s.missing.contains(&t.tx_hash))
            .cloned()
            .collect())
    }

    /// The mempool's transfers, at the block after the tip (as an adapter reports them).
    async fn pending(&self) -> Result<Vec<workers::chain::Transfer>, workers::chain::ChainError> {
        let s = self.state.lock().unwrap();
        Ok(s.mempool.iter().map(|t| workers::chain::Transfer { block_height: s.tip + 1, ..t.clone() }).collect())
    }

    async fn status(
        &self,
        tx_hash: &str,
        _: i64,
        _: Option<u64>,
    ) -> Result<workers::chain::TxStatus, workers::chain::ChainError> {
        let mut s = self.state.lock().unwrap();
        if s.gone_once.remove(tx_hash) || s.missing.contains(tx_hash) {
            return Ok(workers::chain::TxStatus::Gone);
        }
        if s.mempool.iter().any(|t| t.tx_hash == tx_hash) {
            return Ok(workers::chain::TxStatus::Confirmations(0));
        }
        let t = s.transfers.iter().find(|t| t.tx_hash == tx_hash).unwrap();
        Ok(workers::chain::TxStatus::Confirmations(s.tip.saturating_sub(t.block_height) + 1))
    }
}

impl Pipe {
    /// Installs a [`ScriptedChain`] for ethereum, creates a 1 ETH invoice and sends it 1 ETH in a
    /// new block: the chain, the invoice and the transaction's hash.
    pub async fn scripted_eth_payment(&mut self) -> (std::sync::Arc<ScriptedChain>, Uuid, String) {
        let chain = ScriptedChain::install(self, "ethereum");
        let inv = self.invoice("ETH", "ethereum", "1").await;
        let tx = chain.send(&self.address_key(inv).await, "1");
        (chain, inv, tx)
    }

    /// `blocks` new blocks on the scripted chain, then a pipeline step.
    pub async fn mine_scripted_and_step(&self, chain: &ScriptedChain, blocks: u64) {
        chain.mine(blocks);
        self.step().await;
    }

    /// The node loses `tx`; then `rounds` times, a pipeline step and a new block.
    pub async fn lose_for(&self, chain: &ScriptedChain, tx: &str, rounds: usize) {
        chain.lose(tx);
        for _ in 0..rounds {
            self.step().await;
            chain.mine(1);
        }
    }

    pub async fn address_key(&self, invoice: Uuid) -> String {
        let inv = entity::invoice::Entity::find_by_id(invoice).one(&self.app.state.db).await.unwrap().unwrap();
        inv.address_key.unwrap()
    }

    pub async fn payment_of(&self, invoice: Uuid) -> entity::payment::Model {
        entity::payment::Entity::find()
            .filter(entity::payment::Column::InvoiceId.eq(invoice))
            .one(&self.app.state.db)
            .await
            .unwrap()
            .unwrap()
    }
}

impl ScriptedChain {
    /// `tx` is back at its old height (a reorganisation back to the fork that holds it).
    pub fn restore(&self, tx: &str) {
        self.state.lock().unwrap().missing.remove(tx);
    }
}
