//! Live settlement conversion through the `treasury` venue: a live ETH invoice settling into
//! USDT on tron, paid on a scripted live chain, converted from the house's inventory. Converted
//! (the house's books move with the merchant's), refused at the quote (inventory short, no cap,
//! past the cap), refused at execution (inventory taken out after the quote), and refused in the
//! credit's own transaction (a venue that fills blindly: the house's balance lock refuses it).

use std::collections::BTreeMap;
use std::sync::Arc;

use entity::{EntryType, Environment, balance, ledger_entry, settlement_conversion};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};
use testkit::d;
use uuid::Uuid;
use workers::converter::venue::{self, Venues};
use workers::converter::{self, Converter};
use workers::{scanner, tracker};

use crate::support::scripted::ScriptedChain;

/// 1 ETH at the static 3 000 USD, 0.5 % spread, then the 0.25 % fee, in USDT at 1 USD.
const NET: &str = "2977.5375";

struct Live {
    base: crate::support::pipe::Pipe,
    key: String,
    chain: Arc<ScriptedChain>,
    converter: Converter,
}

impl std::ops::Deref for Live {
    type Target = crate::support::pipe::Pipe;
    fn deref(&self) -> &crate::support::pipe::Pipe {
        &self.base
    }
}

/// A pipe whose live ethereum chain is scripted, with the treasury venue and `caps`.
async fn live(caps: &[(&str, &str)]) -> Live {
    let caps: BTreeMap<String, Decimal> = caps.iter().map(|(a, c)| ((*a).to_owned(), d(c))).collect();
    let mut base = crate::support::pipe::Pipe::start(|c| {
        c.settlement.live_venue = "treasury".into();
        c.settlement.treasury.max_exposure = caps;
    })
    .await;
    let chain = ScriptedChain::new("ethereum");
    base.chains.insert(Environment::Live, chain.clone());
    let app = &base.app;
    app.state.rates.refresh(Environment::Live).await.unwrap();
    let converter = Converter {
        db: app.state.db.clone(),
        venues: Venues::from_config(&app.state.config, app.state.rates.clone(), &app.state.db),
        quote_lock: chrono::Duration::seconds(900),
    };
    let key = app.key(base.merchant, Environment::Live, &[]).await;
    Live { base, key, chain, converter }
}

impl Live {
    async fn fund(&self, gate: &str, amount: &str) {
        let txn = domain::db::begin_write(&self.app.state.db).await.unwrap();
        let g = domain::gates::find(gate).unwrap();
        domain::treasury::fund(&txn, Environment::Live, g, d(amount), "test inventory").await.unwrap();
        txn.commit().await.unwrap();
    }

    /// A live 1 ETH invoice settling into USDT on tron, paid in a new block; the invoice id.
    async fn paid_invoice(&self) -> Uuid {
        let body =
            json!({"currency": "ETH", "network": "ethereum", "amount": "1", "target_settlement_asset": "tron_usdt"});
        let inv = self.app.create_invoice_id(&self.key, body).await;
        let row = entity::invoice::Entity::find_by_id(inv).one(&self.app.state.db).await.unwrap().unwrap();
        self.chain.send(&row.address_key.unwrap(), "1");
        inv
    }

    /// Scan the live chain and track every payment, then one converter pass.
    async fn step(&self) {
        let db = &self.app.state.db;
        while scanner::scan_gate(db, self.chain.as_ref(), Environment::Live, 100).await.unwrap().is_some() {}
        let cfg = &self.app.state.config.pipeline;
        for p in entity::payment::Entity::find().all(db).await.unwrap() {
            tracker::track_payment(db, &self.chains, cfg, p.id).await.unwrap();
        }
        for id in converter::due(db, 100).await.unwrap() {
            self.converter.step(id).await.unwrap();
        }
    }

    /// Detected and quoted, then mined to ethereum's 12 confirmations and settled.
    async fn settle(&self) {
        self.step().await;
        self.chain.mine(11);
        self.step().await;
        self.step().await;
    }

    async fn available(&self, merchant: Uuid, gate: &str) -> Decimal {
        balance::Entity::find()
            .filter(balance::Column::MerchantId.eq(merchant))
            .filter(balance::Column::Environment.eq(Environment::Live))
            .filter(balance::Column::GateId.eq(gate))
            .one(&self.app.state.db)
            .await
            .unwrap()
            .map_or(Decimal::ZERO, |b| b.available.0)
    }

    async fn house_entries(&self) -> Vec<(String, EntryType, Decimal)> {
        let house: Uuid = domain::treasury::HOUSE.into();
        for gate in ["ethereum", "tron_usdt"] {
            if self.available(house, gate).await != Decimal::ZERO {
                testkit::assert_ledger_sums(&self.app.state.db, house, gate).await;
            }
        }
        ledger_entry::Entity::find()
            .filter(ledger_entry::Column::MerchantId.eq(house))
            .order_by_asc(ledger_entry::Column::Id)
            .all(&self.app.state.db)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.gate_id, e.entry_type, e.amount.0))
            .collect()
    }

    async fn conversion(&self) -> settlement_conversion::Model {
        settlement_conversion::Entity::find().one(&self.app.state.db).await.unwrap().expect("a conversion")
    }

    /// The one `balance.credited` event's (outcome, failure_class, credited gate, amount).
    async fn credited(&self) -> (String, Value, String, String) {
        let events = testkit::event_payloads(&self.app.state.db, "balance.credited").await;
        assert_eq!(events.len(), 1, "{events:?}");
        let e = &events[0];
        let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
        (s("outcome"), e["failure_class"].clone(), s("credited_network"), s("credited_amount"))
    }

    /// The paid asset credited to the merchant, the house untouched but for its funding.
    async fn assert_source_credited(&self, class: &str, funded: &[(&str, &str)]) {
        let (outcome, failure, _, _) = self.credited().await;
        assert_eq!((outcome.as_str(), failure.as_str()), ("source_credited", Some(class)));
        assert_eq!(self.available(self.merchant, "ethereum").await, d("1"));
        assert_eq!(self.available(self.merchant, "tron_usdt").await, Decimal::ZERO);
        let house: Vec<_> = self.house_entries().await.into_iter().map(|(g, t, a)| (g, t, a.normalize())).collect();
        let expected: Vec<_> =
            funded.iter().map(|(g, a)| ((*g).to_owned(), EntryType::HouseFunding, d(a).normalize())).collect();
        assert_eq!(house, expected);
    }
}

#[tokio::test]
async fn a_live_invoice_is_converted_from_the_houses_inventory() {
    let p = live(&[("ETH", "10")]).await;
    p.fund("tron_usdt", "5000").await;
    let inv = p.paid_invoice().await;
    p.settle().await;

    let c = p.conversion().await;
    assert_eq!((c.venue.as_str(), c.state), ("treasury", entity::ConversionState::Executed));
    assert_eq!(c.net_amount.unwrap().0, d(NET));
    assert_eq!(p.credited().await, ("target_credited".into(), Value::Null, "tron".into(), NET.into()));
    // The merchant: USDT credited, nothing left in ETH (converted away).
    assert_eq!(p.available(p.merchant, "tron_usdt").await, d(NET));
    assert_eq!(p.available(p.merchant, "ethereum").await, Decimal::ZERO);
    testkit::assert_ledger_sums(&p.app.state.db, p.merchant, "tron_usdt").await;
    // The house: paid the net out of its USDT, took the ETH.
    let house = p.house_entries().await;
    assert_eq!(
        house,
        [
            ("tron_usdt".into(), EntryType::HouseFunding, d("5000")),
            ("ethereum".into(), EntryType::ConversionInventoryIn, d("1")),
            ("tron_usdt".into(), EntryType::ConversionInventoryOut, -d(NET)),
        ]
    );
    let house_id: Uuid = domain::treasury::HOUSE.into();
    assert_eq!(p.available(house_id, "tron_usdt").await, d("5000") - d(NET));
    assert_eq!(p.available(house_id, "ethereum").await, d("1"));
    // Settled once: more passes change nothing.
    p.step().await;
    assert_eq!(p.house_entries().await.len(), 3);
    let got = p.app.get(&format!("/v1/invoices/{inv}"), Some(&p.key)).await;
    assert_eq!(got.body["data"]["status"], "paid", "{:?}", got.body);
}

#[tokio::test]
async fn a_quote_the_inventory_cannot_fill_falls_back_to_the_paid_asset() {
    let p = live(&[("ETH", "10")]).await;
    p.fund("tron_usdt", "100").await;
    p.paid_invoice().await;
    p.settle().await;
    assert_eq!(p.conversion().await.state, entity::ConversionState::QuoteFailed);
    p.assert_source_credited("quote_rejected", &[("tron_usdt", "100")]).await;
}

#[tokio::test]
async fn a_quote_past_the_exposure_cap_or_without_one_falls_back_to_the_paid_asset() {
    for caps in [&[("ETH", "0.5")][..], &[("BTC", "10")][..]] {
        let p = live(caps).await;
        p.fund("tron_usdt", "5000").await;
        p.paid_invoice().await;
        p.settle().await;
        assert_eq!(p.conversion().await.state, entity::ConversionState::QuoteFailed, "{caps:?}");
        p.assert_source_credited("quote_rejected", &[("tron_usdt", "5000")]).await;
    }
}

#[tokio::test]
async fn inventory_taken_out_after_the_quote_refuses_the_execution() {
    let p = live(&[("ETH", "10")]).await;
    p.fund("tron_usdt", "5000").await;
    p.paid_invoice().await;
    p.step().await;
    assert_eq!(p.conversion().await.state, entity::ConversionState::Quoted);
    p.fund("tron_usdt", "-4000").await;
    p.chain.mine(11);
    p.step().await;
    p.step().await;
    assert_eq!(p.conversion().await.state, entity::ConversionState::ExecutionFailed);
    p.assert_source_credited("execution_rejected", &[("tron_usdt", "5000"), ("tron_usdt", "-4000")]).await;
}

/// A venue named `treasury` that quotes and fills whatever the house holds: the credit's own
/// transaction still refuses to take the house's inventory below zero, and credits the paid asset.
struct Blind;

#[async_trait::async_trait]
impl venue::Venue for Blind {
    fn name(&self) -> &'static str {
        venue::TREASURY
    }

    async fn quote(&self, req: &venue::QuoteRequest<'_>) -> Result<venue::Quoted, venue::VenueError> {
        Ok(venue::Quoted::Quote(venue::Quote {
            rate: d("2977.5375"),
            gross: d(NET),
            fee: Decimal::ZERO,
            net: d(NET),
            locked_until: req.now + req.lock,
            venue_ref: None,
        }))
    }

    async fn execute(
        &self,
        _: &settlement_conversion::Model,
        _: Option<&str>,
    ) -> Result<venue::Executed, venue::VenueError> {
        Ok(venue::Executed::Filled)
    }
}

#[tokio::test]
async fn the_credit_transaction_never_takes_the_houses_inventory_below_zero() {
    let mut p = live(&[("ETH", "10")]).await;
    p.converter.venues = p.converter.venues.clone().with_live(Arc::new(Blind));
    p.fund("tron_usdt", "2000").await;
    p.paid_invoice().await;
    p.settle().await;
    assert_eq!(p.conversion().await.state, entity::ConversionState::ExecutionFailed);
    p.assert_source_credited("execution_rejected", &[("tron_usdt", "2000")]).await;

    // Within the inventory but past the cap, read in the same transaction: refused too.
    let mut p = live(&[("ETH", "0.5")]).await;
    p.converter.venues = p.converter.venues.clone().with_live(Arc::new(Blind));
    p.fund("tron_usdt", "5000").await;
    p.paid_invoice().await;
    p.settle().await;
    p.assert_source_credited("execution_rejected", &[("tron_usdt", "5000")]).await;
}

/// Two payments quoted against inventory that fills one: settled at once, one is converted and
/// the other credited in the paid asset; the house's inventory never goes below zero.
#[tokio::test]
async fn racing_conversions_never_spend_one_unit_of_inventory_twice() {
    let p = live(&[("ETH", "10")]).await;
    p.fund("tron_usdt", "4000").await;
    // Each paid and scanned in turn (a live scanner starts at the tip it first sees).
    p.paid_invoice().await;
    p.step().await;
    p.paid_invoice().await;
    p.step().await;
    let quoted = settlement_conversion::Entity::find().all(&p.app.state.db).await.unwrap();
    assert_eq!(quoted.iter().map(|c| c.state).collect::<Vec<_>>(), [entity::ConversionState::Quoted; 2]);
    p.chain.mine(11);
    // Confirm both without a converter pass, then settle them concurrently.
    let db = &p.app.state.db;
    for pay in entity::payment::Entity::find().all(db).await.unwrap() {
        tracker::track_payment(db, &p.chains, &p.app.state.config.pipeline, pay.id).await.unwrap();
    }
    let due = converter::due(db, 100).await.unwrap();
    assert_eq!(due.len(), 2);
    let (a, b) = tokio::join!(p.converter.step(due[0]), p.converter.step(due[1]));
    assert_eq!((a.unwrap(), b.unwrap()), (converter::Step::Settled, converter::Step::Settled));
    let mut outcomes: Vec<_> = testkit::event_payloads(db, "balance.credited")
        .await
        .iter()
        .map(|e| (e["outcome"].as_str().unwrap().to_owned(), e["failure_class"].as_str().map(str::to_owned)))
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        [("source_credited".into(), Some("execution_rejected".into())), ("target_credited".into(), None)]
    );
    let house: Uuid = domain::treasury::HOUSE.into();
    assert_eq!(p.available(house, "tron_usdt").await, d("4000") - d(NET));
    assert_eq!(p.available(p.merchant, "tron_usdt").await, d(NET));
    assert_eq!(p.available(p.merchant, "ethereum").await, d("1"));
    p.house_entries().await;
}
