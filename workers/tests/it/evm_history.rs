//! The EVM tracker against a node that lacks part of the history (a fake JSON-RPC node: anvil
//! keeps everything). A deposit's transaction with no receipt and not in the mempool counts as
//! missing only when its block is there without it; a node whose transaction index does not
//! reach the block (geth `--history.transactions`), or that lacks the block, answers an error
//! the tracker retries, never `Gone`, so no deposit is reversed because of the node's settings.
//! And a block the node does not serve yet (`null`) fails the scan instead of passing for empty.

use crate::support::fake_node::{FakeNode, Shared};
use axum::Json;
use axum::extract::State;
use axum::routing::post;
use domain::config::{EvmConfig, EvmNetworkConfig};
use serde_json::{Value, json};
use workers::chain::TxStatus;

const TX: &str = "0xaaaa000000000000000000000000000000000000000000000000000000000001";

/// What block 50 holds on the fake node: nothing (`None`: the node does not have it), or these
/// transaction hashes. No transaction has a receipt and the mempool is empty.
struct Node {
    block_50: Option<Vec<&'static str>>,
}

async fn call(State(node): State<Shared<Node>>, Json(req): Json<Value>) -> Json<Value> {
    let node = node.lock().unwrap();
    let result = match req["method"].as_str().unwrap_or("") {
        "eth_blockNumber" => json!("0x64"),
        "eth_getLogs" => json!([]),
        "eth_getBlockByNumber" if req["params"][0] == "0x32" => match &node.block_50 {
            Some(txs) => json!({"number": "0x32", "hash": format!("0x{}", "5".repeat(64)), "transactions": txs}),
            None => Value::Null,
        },
        _ => Value::Null,
    };
    Json(json!({"jsonrpc": "2.0", "id": req["id"], "result": result}))
}

async fn status_with(block_50: Option<Vec<&'static str>>) -> Result<TxStatus, workers::chain::ChainError> {
    let node = FakeNode::serve(Node { block_50 }, "/", post(call)).await;
    let mut cfg = EvmConfig::default();
    let net = EvmNetworkConfig { rpc_url: node.url.clone(), max_retries: 0, ..Default::default() };
    cfg.networks.insert("ethereum".into(), net);
    let chain = workers::chain::evm::chains(&cfg).into_iter().find(|c| c.gate().id == "ethereum").unwrap();
    chain.status(TX, 0, Some(50)).await
}

#[tokio::test]
async fn a_transaction_without_a_receipt_is_missing_only_when_its_block_is_there_without_it() {
    // The block holds it but the node has no receipt: the index does not reach that far.
    let err = status_with(Some(vec![TX])).await.unwrap_err();
    assert!(err.to_string().contains("transaction index does not reach"), "{err}");
    // The node does not hold the block at all.
    let err = status_with(None).await.unwrap_err();
    assert!(err.to_string().contains("does not hold block 50"), "{err}");
    // The block is there without it (a reorganisation replaced it): missing.
    let other = "0xbbbb000000000000000000000000000000000000000000000000000000000002";
    assert_eq!(status_with(Some(vec![other])).await.unwrap(), TxStatus::Gone);
}

#[tokio::test]
async fn a_block_the_node_does_not_serve_yet_fails_the_scan() {
    let node = FakeNode::serve(Node { block_50: None }, "/", post(call)).await;
    let mut cfg = EvmConfig::default();
    let net =
        EvmNetworkConfig { rpc_url: node.url.clone(), max_retries: 0, rescan_blocks: Some(0), ..Default::default() };
    cfg.networks.insert("ethereum".into(), net);
    let chain = workers::chain::evm::chains(&cfg).into_iter().find(|c| c.gate().id == "ethereum").unwrap();
    let err = chain.transfers(50, 50).await.unwrap_err();
    assert!(err.to_string().contains("block 50 is not available"), "{err}");
    // The token gate reads logs over the range: `[]` counts only once the range's last block is there.
    let token = workers::chain::evm::chains(&cfg).into_iter().find(|c| c.gate().id == "ethereum_usdt").unwrap();
    let err = token.transfers(50, 50).await.unwrap_err();
    assert!(err.to_string().contains("block 50 is not available"), "{err}");
    node.with(|n| n.block_50 = Some(vec![]));
    assert!(chain.transfers(50, 50).await.unwrap().is_empty(), "an empty block is fine");
    assert!(token.transfers(50, 50).await.unwrap().is_empty());
}
