//! A recorded EVM node for `ops bench-evm-scan`: every JSON-RPC call the scanner makes over the
//! benchmark's chain is asked of anvil once ([`record`]), then answered from memory by a
//! separate process ([`serve`], the hidden `ops bench-evm-replay` command), so the node's own
//! cost neither hides the scanner's (anvil spends far more CPU per block than any scanner) nor
//! lands in the scanner's process: the benchmark reads the replay's CPU time apart, from
//! `/proc/<pid>/stat`, as it reads anvil's.
//!
//! What is recorded is what `workers::chain::evm` asks while scanning a native gate:
//! `eth_blockNumber` (the tip) and `eth_getBlockByNumber` of every block of the chain, with full
//! transactions (the scan) and without (a token gate's "is the range's last block there"), each
//! keyed by its method and parameters exactly as sent. An answer is the node's `result`,
//! serialized once at load; the reply is that text with the request's `id` around it. A request
//! not in the recording (another method, another block, other parameters) is answered with a
//! JSON-RPC error naming it, which the scanner retries and then fails on: never a guess.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::bench_node::NodeProcess;

/// The hidden `ops bench-evm-replay` command: serves a recording on 127.0.0.1 (an ephemeral
/// port, printed as the first line of standard output) until killed.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The recording (JSON lines of `{"method", "params", "result"}`), written by the benchmark.
    #[arg(long)]
    recording: PathBuf,
}

/// One recorded call.
fn key(method: &str, params: &Value) -> String {
    format!("{method} {params}")
}

/// Asks `node` once for every call the EVM adapter makes while scanning blocks `from..=to` (and
/// the tip) and writes the answers to a recording in `dir`. Returns its path and its size in bytes.
pub async fn record(node: &NodeProcess, from: u64, to: u64, dir: &std::path::Path) -> anyhow::Result<(PathBuf, u64)> {
    let path = dir.join("evm-replay.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut line = |method: &str, params: Value, result: Value| -> anyhow::Result<()> {
        serde_json::to_writer(&mut out, &json!({"method": method, "params": params, "result": result}))?;
        out.write_all(b"\n")?;
        Ok(())
    };
    line("eth_blockNumber", json!([]), node.rpc("eth_blockNumber", json!([])).await?)?;
    for n in from..=to {
        for full in [true, false] {
            // As the adapter writes a block number (`rpc::block_param`): lowercase hex, no padding.
            let params = json!([format!("0x{n:x}"), full]);
            let block = node.rpc("eth_getBlockByNumber", params.clone()).await?;
            anyhow::ensure!(block.get("transactions").is_some(), "block {n} missing from the node");
            line("eth_getBlockByNumber", params, block)?;
        }
    }
    out.flush()?;
    drop(out);
    let size = std::fs::metadata(&path)?.len();
    Ok((path, size))
}

/// Starts the replay of `recording` as a child process (`ops bench-evm-replay`) and waits until
/// it listens. `dir` (holding the recording) lives as long as the process.
pub fn spawn(recording: &std::path::Path, dir: tempfile::TempDir) -> anyhow::Result<NodeProcess> {
    let exe = std::env::current_exe().context("the ops binary")?;
    let mut child = Command::new(exe)
        .arg("bench-evm-replay")
        .arg("--recording")
        .arg(recording)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the replay")?;
    let mut first = String::new();
    let stdout = child.stdout.take().context("the replay's standard output")?;
    std::io::BufReader::new(stdout).read_line(&mut first)?;
    let Some(url) = first.trim().strip_prefix("listening ").map(str::to_owned) else {
        let _ = child.kill();
        anyhow::bail!("the replay did not start: {first:?}");
    };
    Ok(NodeProcess::replay(child, url, dir))
}

/// The answers by request, each the `result` text as the node gave it.
struct Answers(HashMap<String, Bytes>);

pub async fn serve(args: ReplayArgs) -> anyhow::Result<()> {
    let file = std::fs::File::open(&args.recording).with_context(|| format!("{}", args.recording.display()))?;
    let mut answers = HashMap::new();
    for line in std::io::BufReader::new(file).lines() {
        let entry: Value = serde_json::from_str(&line?)?;
        let method = entry["method"].as_str().context("recording entry without method")?;
        let result = serde_json::to_vec(&entry["result"])?;
        answers.insert(key(method, &entry["params"]), Bytes::from(result));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let router = axum::Router::new().fallback(answer).with_state(Arc::new(Answers(answers)));
    axum::serve(listener, router).await?;
    Ok(())
}

/// One JSON-RPC request (or a batch of them) answered from the recording.
async fn answer(State(answers): State<Arc<Answers>>, body: Bytes) -> impl IntoResponse {
    let reply = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(batch)) => {
            let mut out = b"[".to_vec();
            for (i, request) in batch.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                reply_to(&answers, request, &mut out);
            }
            out.push(b']');
            out
        }
        Ok(request) => {
            let mut out = Vec::new();
            reply_to(&answers, &request, &mut out);
            out
        }
        Err(e) => serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": e.to_string()}}),
        )
        .unwrap_or_default(),
    };
    ([(header::CONTENT_TYPE, "application/json")], reply)
}

fn reply_to(answers: &Answers, request: &Value, out: &mut Vec<u8>) {
    let id = serde_json::to_vec(&request["id"]).unwrap_or_else(|_| b"null".to_vec());
    let method = request["method"].as_str().unwrap_or("");
    let params = request.get("params").cloned().unwrap_or_else(|| json!([]));
    match answers.0.get(&key(method, &params)) {
        Some(result) => {
            out.reserve(result.len() + id.len() + 32);
            out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            out.extend_from_slice(&id);
            out.extend_from_slice(b",\"result\":");
            out.extend_from_slice(result);
            out.push(b'}');
        }
        None => {
            let message = format!("not in the recording: {method} {params}");
            eprintln!("bench-evm-replay: {message}");
            let error = json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": message}});
            out.extend_from_slice(&serde_json::to_vec(&error).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers() -> Answers {
        let mut m = HashMap::new();
        m.insert(key("eth_getBlockByNumber", &json!(["0x2", true])), Bytes::from_static(b"{\"transactions\":[]}"));
        Answers(m)
    }

    #[test]
    fn a_recorded_call_is_answered_with_its_id_and_an_unknown_one_with_an_error() {
        let mut out = Vec::new();
        reply_to(
            &answers(),
            &json!({"jsonrpc": "2.0", "id": 7, "method": "eth_getBlockByNumber", "params": ["0x2", true]}),
            &mut out,
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, json!({"jsonrpc": "2.0", "id": 7, "result": {"transactions": []}}));
        for (method, params) in [
            ("eth_getBlockByNumber", json!(["0x3", true])),
            ("eth_getBlockByNumber", json!(["0x2", false])),
            ("eth_getLogs", json!([{}])),
        ] {
            let mut out = Vec::new();
            reply_to(&answers(), &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}), &mut out);
            let v: Value = serde_json::from_slice(&out).unwrap();
            assert!(v.get("result").is_none() && v["error"]["code"] == -32601, "{v}");
        }
    }
}
