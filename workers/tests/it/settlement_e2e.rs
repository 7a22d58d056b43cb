//! The `settlement-converter` binary as deployed, beside the real `api`, `deposit-scanner`,
//! `confirmation-tracker` and `webhook-deliverer` processes (PostgreSQL + Redis with
//! `--features redis-tests,pg-tests`, else SQLite), with a loopback receiver verifying every
//! webhook signature:
//!
//! - a fiat-priced BTC invoice settles into USDT on tron: the target balance gets the net
//!   amount, the ledger is exact to the last decimal, `balance.credited` (`target_credited`)
//!   arrives signed after `invoice.paid`; the converter is SIGKILLed between the quote and the
//!   confirmation (the tracker starts only then), on Redis its queue is flushed, and the credit
//!   still happens once, when a new converter runs;
//! - a POL invoice whose payment confirms (128 blocks) after its quote's lock (5 s): the paid
//!   asset is credited, `quote_expired`.

use testkit::fleet;

use std::time::{Duration, Instant};

use api::webhooks::receiver::{Behaviour, Receiver};
use domain::webhooks::endpoints;
use domain::webhooks::outbound::TargetPolicy;
use domain::webhooks::secrets::SecretBox;
use entity::{Bucket, EntryType, Environment, ledger_entry, payment, settlement_conversion};
use fleet::{Deployment, Proc, wait_ready};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};
use testkit::d;
use uuid::Uuid;

const KEY_HEX: &str = "5c1e8d6f0b2a4c7e9d3f1a8b6c4e2d0f5c1e8d6f0b2a4c7e9d3f1a8b6c4e2d0f";

struct Setup {
    dep: Deployment,
    receiver: Receiver,
}

impl std::ops::Deref for Setup {
    type Target = Deployment;
    fn deref(&self) -> &Deployment {
        &self.dep
    }
}

async fn setup() -> Setup {
    let dep = Deployment::start(
        "Converts",
        Environment::Test,
        &[
            ("PAYGATE_WEBHOOKS__SECRET_KEY", KEY_HEX),
            ("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true"),
            ("PAYGATE_WEBHOOKS__DISPATCH_INTERVAL_MS", "50"),
            // The test flushes Redis right after the BTC payment is paid, possibly while that
            // `invoice.paid` delivery's job is still queued: the sweeper re-enqueues it once it
            // is stale (2 s here, as in webhooks_e2e; 60 s by default, the test's whole wait).
            ("PAYGATE_WEBHOOKS__SWEEP_INTERVAL_MS", "200"),
            ("PAYGATE_WEBHOOKS__STALE_AFTER_SECS", "2"),
            ("PAYGATE_SETTLEMENT__POLL_INTERVAL_MS", "100"),
            // The BTC payment must confirm within its quote's lock and the POL one after it,
            // whatever the machine's speed: a 15 s lock leaves the BTC confirmation (3 blocks,
            // then a tracker process start) ample time, and 250 ms polygon blocks put the POL
            // confirmation (128 blocks) at least 32 s after its deposit, past any lock taken
            // at its detection. (A 5 s lock raced a slow tracker start in a CI run.)
            ("PAYGATE_SETTLEMENT__QUOTE_LOCK_SECS", "15"),
            ("PAYGATE_SANDBOX__GATE_BLOCK_INTERVAL_MS__POLYGON", "250"),
        ],
    )
    .await;
    let sbox = SecretBox::new(SecretBox::parse_key(KEY_HEX).unwrap());
    let receiver = Receiver::start("127.0.0.1:0".parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let policy = TargetPolicy { allow_insecure: true };
    let (_, secret) = endpoints::set(&dep.conn, &sbox, policy, dep.merchant.into(), Environment::Test, &receiver.url())
        .await
        .unwrap();
    receiver.set_secrets(&[secret.unwrap().as_str()]);
    Setup { dep, receiver }
}

impl Setup {
    async fn start(&self, binary: &str) -> Proc {
        let p = self.fleet.worker(binary);
        wait_ready(&self.http, &p).await;
        p
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(format!("{}{path}", self.api.url))
            .header("X-API-Key", &self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{path}");
        r.json::<Value>().await.unwrap()["data"].clone()
    }

    async fn invoice(&self, id: &str) -> Value {
        let r = self.http.get(format!("{}/v1/invoices/{id}", self.api.url)).header("X-API-Key", &self.key);
        r.send().await.unwrap().json::<Value>().await.unwrap()["data"].clone()
    }

    /// Polls the invoice until `check` accepts it.
    async fn wait_invoice(&self, id: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let inv = self.invoice(id).await;
            if check(&inv) {
                return inv;
            }
            assert!(Instant::now() < deadline, "invoice {id} never reached {what}: {inv}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn credited(&self, id: &str) -> payment::Model {
        let id = Uuid::parse_str(id).unwrap();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let p = payment::Entity::find().filter(payment::Column::InvoiceId.eq(id)).one(&self.conn).await.unwrap();
            if let Some(p) = p.filter(|p| p.credited_at.is_some()) {
                return p;
            }
            assert!(Instant::now() < deadline, "invoice {id}'s payment never credited");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn ledger(&self, gate: &str) -> Vec<(EntryType, Bucket, Decimal)> {
        let (_, _) = testkit::assert_ledger_sums(&self.conn, self.merchant, gate).await;
        ledger_entry::Entity::find()
            .filter(ledger_entry::Column::MerchantId.eq(self.merchant))
            .filter(ledger_entry::Column::GateId.eq(gate))
            .order_by_asc(ledger_entry::Column::Id)
            .all(&self.conn)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.entry_type, e.bucket, e.amount.0))
            .collect()
    }

    /// The deliveries the receiver got for `invoice`, in arrival order: (event, data), each
    /// delivery once (delivery is at least once: a merchant dedupes on the delivery id, and so
    /// does this). Waits for `n` of them.
    async fn hooks(&self, invoice: &str, n: usize) -> Vec<(String, Value)> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut seen = std::collections::HashSet::new();
            let got: Vec<(String, Value)> = self
                .receiver
                .received()
                .into_iter()
                .filter(|r| r.body["data"]["invoice_id"] == invoice)
                .filter(|r| seen.insert(r.delivery_id.clone()))
                .map(|r| {
                    assert!(r.verified, "unverified webhook {}", r.body);
                    (r.event, r.body["data"].clone())
                })
                .collect();
            if got.len() >= n {
                return got;
            }
            assert!(Instant::now() < deadline, "only {} of {n} webhooks for {invoice}: {got:?}", got.len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_settle_into_the_target_asset_or_the_paid_one_through_the_converter_process() {
    let s = setup().await;
    let _scanner = s.start(env!("CARGO_BIN_EXE_deposit-scanner")).await;
    // No tracker yet: the payments are seen and quoted, but cannot confirm before the converter
    // is gone.
    let _deliverer = s.start(env!("CARGO_BIN_EXE_webhook-deliverer")).await;
    let mut converter = s.start(env!("CARGO_BIN_EXE_settlement-converter")).await;

    // 600 USD in BTC (0.01 at the sandbox's 60 000), settled into USDT on tron.
    let btc = s
        .post(
            "/v1/invoices",
            json!({"currency": "BTC", "amount_fiat": "600", "fiat_currency": "USD", "target_settlement_asset": "tron_usdt"}),
        )
        .await;
    let btc_id = btc["id"].as_str().unwrap().to_owned();
    assert_eq!(btc["amount_requested"], "0.01");
    // 50 POL, settled into USDT on tron; confirms after 128 blocks, long after its 15 s quote.
    let pol = s
        .post("/v1/invoices", json!({"currency": "POL", "amount": "50", "target_settlement_asset": "tron_usdt"}))
        .await;
    let pol_id = pol["id"].as_str().unwrap().to_owned();
    s.post("/v1/test/deposits", json!({"invoice_id": pol_id, "amount": "50"})).await;
    s.post("/v1/test/deposits", json!({"invoice_id": btc_id, "amount": "0.01"})).await;

    // Quoted at detection by the converter process.
    let quoted = s
        .wait_invoice(&btc_id, "a quote", |i| i["payments"][0]["settlement_conversion"]["quote_status"] == "quoted")
        .await;
    let c = &quoted["payments"][0]["settlement_conversion"];
    assert_eq!((c["net_amount"].as_str(), c["fee_amount"].as_str()), (Some("595.5075"), Some("1.4925")));
    s.wait_invoice(&pol_id, "a quote", |i| i["payments"][0]["settlement_conversion"]["quote_status"] == "quoted").await;
    // The converter dies before the payments are confirmed; on Redis its queue is flushed too.
    converter.kill();
    let _tracker = s.start(env!("CARGO_BIN_EXE_confirmation-tracker")).await;
    s.wait_invoice(&btc_id, "paid", |i| i["status"] == "paid").await;
    if cfg!(feature = "redis-tests") {
        s.fleet.flush_redis().await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let p = payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(Uuid::parse_str(&btc_id).unwrap()))
        .one(&s.conn)
        .await
        .unwrap()
        .unwrap();
    assert!(p.credited_at.is_none(), "only the converter credits a converting payment");
    let _converter = s.start(env!("CARGO_BIN_EXE_settlement-converter")).await;

    let p = s.credited(&btc_id).await;
    assert_eq!(
        (p.credited_gate_id.as_deref(), p.credited_amount.map(|a| a.0)),
        (Some("tron_usdt"), Some(d("595.5075")))
    );
    let inv = s.invoice(&btc_id).await;
    let c = &inv["payments"][0]["settlement_conversion"];
    assert_eq!((c["quote_status"].as_str(), c["execution_status"].as_str()), (Some("quoted"), Some("executed")));
    assert_eq!(s.ledger("bitcoin").await, testkit::converted_source_entries("0.01"));
    // Each event once; their order is not asserted: a delivery whose job the Redis flush dropped
    // is re-enqueued by the sweeper and may arrive after later ones (per-invoice ordering is
    // not built yet).
    let hooks = s.hooks(&btc_id, 3).await;
    let mut kinds: Vec<&str> = hooks.iter().map(|(k, _)| k.as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["balance.credited", "invoice.confirming", "invoice.paid"]);
    let credited = &hooks.iter().find(|(k, _)| k == "balance.credited").unwrap().1;
    assert_eq!(
        (credited["outcome"].as_str(), credited["credited_amount"].as_str()),
        (Some("target_credited"), Some("595.5075"))
    );
    assert_eq!((credited["source_amount"].as_str(), credited["source_currency"].as_str()), (Some("0.01"), Some("BTC")));
    assert_eq!(
        (credited["credited_currency"].as_str(), credited["credited_network"].as_str()),
        (Some("USDT"), Some("tron"))
    );

    // The POL payment confirms after its quote's lock: POL is credited instead.
    let p = s.credited(&pol_id).await;
    assert_eq!((p.credited_gate_id.as_deref(), p.credited_amount.map(|a| a.0)), (Some("polygon"), Some(d("50"))));
    let conv = settlement_conversion::Entity::find_by_id(p.id).one(&s.conn).await.unwrap().unwrap();
    assert!(p.confirmed_at.unwrap() > conv.locked_until.unwrap(), "confirmed after the lock");
    let inv = s.invoice(&pol_id).await;
    assert_eq!(inv["status"], "paid");
    let c = &inv["payments"][0]["settlement_conversion"];
    assert_eq!(
        (c["quote_status"].as_str(), c["execution_status"].as_str(), c["failure_class"].as_str()),
        (Some("expired"), Some("failed"), Some("quote_expired"))
    );
    assert_eq!(
        s.ledger("polygon").await,
        [
            (EntryType::InvoiceCredit, Bucket::Pending, d("50")),
            (EntryType::InvoiceCredit, Bucket::Pending, d("-50")),
            (EntryType::InvoiceCredit, Bucket::Available, d("50")),
        ]
    );
    let hooks = s.hooks(&pol_id, 3).await;
    let credited = &hooks.iter().find(|(k, _)| k == "balance.credited").expect("balance.credited").1;
    assert_eq!(
        (credited["outcome"].as_str(), credited["failure_class"].as_str(), credited["credited_amount"].as_str()),
        (Some("source_credited"), Some("quote_expired"), Some("50"))
    );
    assert_eq!(credited["credited_currency"], "POL");

    // Balances exact: USDT holds only the BTC conversion's net amount.
    let (usdt, _) = testkit::assert_ledger_sums(&s.conn, s.merchant, "tron_usdt").await;
    assert_eq!((usdt.available.0, usdt.pending.0), (d("595.5075"), Decimal::ZERO));
    assert_eq!(s.ledger("tron_usdt").await, [(EntryType::ConversionCredit, Bucket::Available, d("595.5075"))]);
    // Exactly one balance.credited per payment was delivered.
    let credited_hooks: std::collections::HashSet<String> =
        s.receiver.received().into_iter().filter(|r| r.event == "balance.credited").map(|r| r.delivery_id).collect();
    assert_eq!(credited_hooks.len(), 2);
}
