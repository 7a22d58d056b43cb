//! TRC-20 `Transfer` log parsing (`workers::chain::tron::token_transfers`) against logs a real
//! EVM produced: TRC-20 is ERC-20 on the TRON VM, with the same event and log layout. anvil
//! runs the test ERC-20 (`api/testkit/evm/TestToken.sol`); each block's receipts
//! (`eth_getBlockReceipts`) are rewritten in the shape java-tron gives them
//! (`/wallet/gettransactioninfobyblocknum`: ids and hex without `0x`, log addresses as 20 bytes,
//! `receipt.result` `SUCCESS` or `REVERT`) and read by the TRON adapter's parser. Run with
//! `--features anvil-tests` (`.ci/run` does).
//!
//! - transfers of the watched token are found with their receivers, exact amounts and ids;
//! - a reverted transfer, another token's transfer and a plain ETH payment are not.
#![cfg(feature = "anvil-tests")]

use domain::addresses::address_key;
use domain::chain::address::AddressFamily;
use domain::chain::address::tron::address_of;
use serde_json::{Value, json};
use testkit::anvil::{Anvil, quantity};
use testkit::d;
use workers::chain::tron::{Trc20, token_transfers};

fn bare(v: &Value) -> String {
    v.as_str().unwrap().trim_start_matches("0x").to_ascii_lowercase()
}

/// An EVM receipt as java-tron's transaction info.
fn tron_info(receipt: &Value) -> Value {
    let logs: Vec<Value> = receipt["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            json!({"address": bare(&l["address"]), "topics": l["topics"].as_array().unwrap().iter().map(bare).collect::<Vec<_>>(),
                   "data": bare(&l["data"])})
        })
        .collect();
    let result = if quantity(&receipt["status"]) == 1 { "SUCCESS" } else { "REVERT" };
    json!({"id": bare(&receipt["transactionHash"]), "blockNumber": quantity(&receipt["blockNumber"]) as u64,
           "receipt": {"result": result}, "log": logs})
}

fn id20(address: &str) -> [u8; 20] {
    hex::decode(address.trim_start_matches("0x")).unwrap().try_into().unwrap()
}

#[tokio::test]
async fn trc20_transfer_logs_are_read_as_an_evm_writes_them() {
    let anvil = Anvil::start().await;
    let token = anvil.deploy_token(1_000_000_000).await;
    let other = anvil.deploy_token(1_000_000_000).await;
    let (alice, bob, carol) =
        (format!("0x{}", "a1".repeat(20)), format!("0x{}", "b2".repeat(20)), format!("0x{}", "c3".repeat(20)));
    let from = anvil.tip().await + 1;
    let paid_alice = anvil.send_token(&token, &alice, 25_500_000).await;
    let paid_bob = anvil.send_token(&token, &bob, 1).await;
    let reverted = anvil.send_token(&token, &carol, 2_000_000_000).await;
    assert_eq!(quantity(&anvil.receipt(&reverted).await["status"]), 0, "more than the supply reverts");
    anvil.send_token(&other, &carol, 7).await;
    anvil.send_eth(&carol, 1).await;
    let to = anvil.tip().await;

    let watched = Trc20 { contract: id20(&token), decimals: 6 };
    let mut found = Vec::new();
    for height in from..=to {
        let receipts = anvil.rpc("eth_getBlockReceipts", json!([format!("0x{height:x}")])).await;
        let infos: Vec<Value> = receipts.as_array().unwrap().iter().map(tron_info).collect();
        found.extend(token_transfers(&json!(infos), watched, height).unwrap());
    }
    let key = |a: &str| address_key(AddressFamily::Tron, &address_of(&id20(a)), None);
    let got: Vec<_> = found.iter().map(|t| (t.tx_hash.clone(), t.address_key.clone(), t.amount)).collect();
    assert_eq!(
        got,
        [
            (paid_alice.trim_start_matches("0x").to_owned(), key(&alice), d("25.5")),
            (paid_bob.trim_start_matches("0x").to_owned(), key(&bob), d("0.000001")),
        ]
    );
}
