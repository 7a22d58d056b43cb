//! Litecoin Core regtest nodes for the Bitcoin adapter's suite: the same JSON-RPC as Bitcoin
//! Core (`getblock` verbosity 2, `getrawtransaction`, `getrawmempool`), real blocks, a real
//! mempool and real reorganisations. `litecoind` 0.21 (Debian's package; `.ci/run` installs it)
//! runs from `/usr/lib/litecoin/litecoind`, or `$LITECOIND`; a missing binary fails the test,
//! never skips it.
//!
//! Each node has its own data directory and ports, `txindex=1` (the adapter's requirement), MWEB
//! disabled (block generation would fail at height 432 when it activates) and a funded wallet
//! for the test's payments (the adapter itself uses no wallet).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use bitcoin::bech32::{Hrp, segwit};
use serde_json::{Value, json};
use testkit::fleet::free_port;

pub struct Litecoind {
    pub url: String,
    pub user: &'static str,
    pub password: &'static str,
    pub p2p_port: u16,
    _child: testkit::serve::KillOnDrop,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    let path =
        std::env::var_os("LITECOIND").map_or_else(|| PathBuf::from("/usr/lib/litecoin/litecoind"), PathBuf::from);
    assert!(
        path.exists(),
        "{} not found: the Bitcoin adapter's suite runs against Litecoin Core regtest \
         (apt-get install litecoind, or set LITECOIND)",
        path.display()
    );
    path
}

/// The regtest Litecoin address (`rltc1…`) with the witness program of a mainnet Bitcoin
/// SegWit address: the same output script, so paying it pays what the adapter watches.
pub fn regtest_address(bitcoin_address: &str) -> String {
    let (_, version, program) = segwit::decode(bitcoin_address).expect("a SegWit address");
    segwit::encode(Hrp::parse("rltc").unwrap(), version, &program).unwrap()
}

impl super::live::Node for Litecoind {
    fn url(&self) -> String {
        self.url.clone()
    }

    async fn advance(&self, n: usize) {
        self.mine(n as u64).await;
    }
}

impl Litecoind {
    /// A new regtest node with a wallet holding 101 mined blocks' coins (50 LTC spendable).
    pub async fn start() -> Litecoind {
        let node = Litecoind::spawn(true).await;
        node.mine(101).await;
        node
    }

    /// [`Litecoind::start`] without a transaction index (`txindex=0`), as a misconfigured
    /// operator node would run.
    pub async fn start_without_txindex() -> Litecoind {
        let node = Litecoind::spawn(false).await;
        node.mine(101).await;
        node
    }

    /// A second node on `other`'s chain (connected and synced), with an empty wallet.
    pub async fn peer_of(other: &Litecoind) -> Litecoind {
        let node = Litecoind::spawn(true).await;
        node.sync_with(other).await;
        node
    }

    /// A node on fresh ports. Each node has its own RPC password, so a node that lost its port
    /// to another (ports are picked free, then bound by the child) never takes that one's
    /// answers for its own: it exits, and is started again on other ports.
    async fn spawn(txindex: bool) -> Litecoind {
        for _ in 0..5 {
            if let Some(node) = Litecoind::try_spawn(txindex).await {
                node.rpc("createwallet", json!(["test"])).await;
                return node;
            }
        }
        panic!("litecoind did not start (5 tries)");
    }

    async fn try_spawn(txindex: bool) -> Option<Litecoind> {
        let dir = tempfile::tempdir().unwrap();
        let (rpc_port, p2p_port) = (free_port(), free_port());
        let password: &'static str = Box::leak(format!("regtest-{rpc_port}-{p2p_port}").into_boxed_str());
        let child = Command::new(binary())
            .arg("-regtest")
            .arg(format!("-datadir={}", dir.path().display()))
            .arg(if txindex { "-txindex=1" } else { "-txindex=0" })
            .args(["-vbparams=mweb:-2:0", "-server=1", "-listen=1", "-discover=0", "-dnsseed=0"])
            .args(["-rpcuser=paygate", "-fallbackfee=0.0002", "-printtoconsole=0"])
            // Bitcoin Core replaces a transaction signalling BIP 125 by a higher-fee conflict;
            // Litecoin Core only when asked.
            .arg("-mempoolreplacement=1")
            .arg(format!("-rpcpassword={password}"))
            .arg(format!("-rpcport={rpc_port}"))
            .arg(format!("-port={p2p_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start litecoind");
        let mut node = Litecoind {
            url: format!("http://127.0.0.1:{rpc_port}/"),
            user: "paygate",
            password,
            p2p_port,
            _child: testkit::serve::KillOnDrop(child),
            http: reqwest::Client::new(),
            _dir: dir,
        };
        // Up when its RPC answers (it refuses with -28 while warming up); gone if it exited.
        let mut tries = 0;
        while node.try_rpc("getblockcount", json!([])).await.is_err() {
            if node._child.0.try_wait().ok().flatten().is_some() {
                return None;
            }
            tries += 1;
            assert!(tries < 600, "litecoind did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(node)
    }

    pub async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, Value> {
        let body = json!({"jsonrpc": "1.0", "id": 1, "method": method, "params": params});
        let r = self.http.post(&self.url).basic_auth(self.user, Some(self.password)).json(&body).send().await;
        let v: Value = match r {
            Ok(r) => r.json().await.map_err(|e| json!(e.to_string()))?,
            Err(e) => return Err(json!(e.to_string())),
        };
        match v.get("error") {
            Some(e) if !e.is_null() => Err(e.clone()),
            _ => Ok(v["result"].clone()),
        }
    }

    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        match self.try_rpc(method, params.clone()).await {
            Ok(v) => v,
            Err(e) => panic!("litecoind {method} {params}: {e}"),
        }
    }

    pub async fn height(&self) -> u64 {
        self.rpc("getblockcount", json!([])).await.as_u64().unwrap()
    }

    /// Mines `n` blocks (to the wallet); their hashes.
    pub async fn mine(&self, n: u64) -> Vec<String> {
        let to = self.rpc("getnewaddress", json!(["", "bech32"])).await;
        let hashes = self.rpc("generatetoaddress", json!([n, to])).await;
        hashes.as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_owned()).collect()
    }

    /// Pays `amount` (decimal string) to the output script of a mainnet Bitcoin SegWit address
    /// from the wallet; the transaction id.
    pub async fn pay(&self, bitcoin_address: &str, amount: &str) -> String {
        let v = self.rpc("sendtoaddress", json!([regtest_address(bitcoin_address), amount])).await;
        v.as_str().unwrap().to_owned()
    }

    /// A transaction spending the same coins as `txid` back to the wallet, signed but not sent:
    /// its double spend.
    pub async fn double_spend_of(&self, txid: &str) -> String {
        let tx = self.rpc("getrawtransaction", json!([txid, true])).await;
        let inputs: Vec<Value> =
            tx["vin"].as_array().unwrap().iter().map(|i| json!({"txid": i["txid"], "vout": i["vout"]})).collect();
        let mut total = 0u64;
        // The coins are spent on this node's chain: the signer is told what they were.
        let mut spent = Vec::new();
        for i in &inputs {
            let prev = self.rpc("getrawtransaction", json!([i["txid"], true])).await;
            let out = &prev["vout"][i["vout"].as_u64().unwrap() as usize];
            spent.push(json!({"txid": i["txid"], "vout": i["vout"], "scriptPubKey": out["scriptPubKey"]["hex"],
                              "amount": out["value"]}));
            // Read from the amount's decimal text: exact satoshis.
            total += workers::chain::bitcoin::wallet::sats(&out["value"]).unwrap();
        }
        let to = self.rpc("getnewaddress", json!(["", "bech32"])).await;
        let amount = format!("{}.{:08}", (total - 10_000) / 100_000_000, (total - 10_000) % 100_000_000);
        let raw = self.rpc("createrawtransaction", json!([inputs, [{ to.as_str().unwrap(): amount }]])).await;
        let signed = self.rpc("signrawtransactionwithwallet", json!([raw, spent])).await;
        assert_eq!(signed["complete"], true, "{signed}");
        signed["hex"].as_str().unwrap().to_owned()
    }

    /// The transaction `txid` as the node holds it.
    pub async fn tx(&self, txid: &str) -> bitcoin::Transaction {
        let hex = self.rpc("getrawtransaction", json!([txid, false])).await;
        bitcoin::consensus::encode::deserialize_hex(hex.as_str().unwrap()).unwrap()
    }

    /// The unspent outputs paying `to`'s script on the node's chain, in satoshis.
    pub async fn unspent_to(&self, to: &bitcoin::Address) -> Vec<u64> {
        let desc = format!("raw({})", to.script_pubkey().to_hex_string());
        let scan = self.rpc("scantxoutset", json!(["start", [{"desc": desc}]])).await;
        let unspents = scan["unspents"].as_array().unwrap();
        unspents.iter().map(|u| workers::chain::bitcoin::wallet::sats(&u["amount"]).unwrap()).collect()
    }

    /// Connects to `other` and waits until both have the same best block.
    pub async fn sync_with(&self, other: &Litecoind) {
        self.rpc("setnetworkactive", json!([true])).await;
        other.rpc("setnetworkactive", json!([true])).await;
        let peer = format!("127.0.0.1:{}", other.p2p_port);
        let _ = self.try_rpc("addnode", json!([peer, "onetry"])).await;
        let mut tries = 0;
        loop {
            let (a, b) =
                (self.rpc("getbestblockhash", json!([])).await, other.rpc("getbestblockhash", json!([])).await);
            if a == b {
                return;
            }
            tries += 1;
            assert!(tries < 600, "nodes did not sync");
            if tries % 20 == 0 {
                let _ = self.try_rpc("addnode", json!([format!("127.0.0.1:{}", other.p2p_port), "onetry"])).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Cuts this node off the network.
    pub async fn isolate(&self) {
        self.rpc("setnetworkactive", json!([false])).await;
        let mut tries = 0;
        while self.rpc("getconnectioncount", json!([])).await.as_u64() != Some(0) {
            tries += 1;
            assert!(tries < 600, "peers did not disconnect");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
