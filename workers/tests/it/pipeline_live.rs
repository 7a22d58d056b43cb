//! The deposit pipeline against a scripted chain standing in for a live node (`ScriptedChain`):
//! a transaction gone from the chain and when to believe it, reversed deposits revived, one
//! tracker job chain per payment over many sweeps, and a scan's batch recorded at once.

use std::time::Duration;

use entity::{Environment, event};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;
use testkit::d;
use uuid::Uuid;
use workers::scanner;
use workers::tracker::Next;
use workers::tracker::{self, sweeper};

use crate::support::scripted::ScriptedChain;
use crate::support::steps::{force_expired, pipe, pipe_with};

/// Live deposit safety: one null answer (a lagging node) never reverses a payment; a transaction
/// missing on checks at several tip heights over the gate's confirmation depth (12 blocks on
/// ethereum) is reversed, once.
#[tokio::test]
async fn one_gone_answer_never_reverses_only_a_span_of_missing_checks_does() {
    let mut p = pipe().await;
    let (chain, inv, tx) = p.scripted_eth_payment().await;
    p.step().await;
    assert_eq!(p.status(inv).await, "confirming");

    chain.null_once(&tx);
    p.step().await;
    assert_eq!(p.status(inv).await, "confirming", "one null answer reverses nothing");
    let pay = p.payment_of(inv).await;
    assert_eq!(pay.status, entity::PaymentStatus::Confirming);
    assert_eq!((pay.missing_since_height, pay.missing_checks), (Some(2), 1), "the missing check is stored");
    // Seen again: the missing state is forgotten, and it confirms normally.
    p.mine_scripted_and_step(&chain, 11).await;
    p.assert_state(inv, "paid", "ethereum", ("1", "0")).await;
    let pay = p.payment_of(inv).await;
    assert_eq!((pay.missing_since_height, pay.missing_last_height, pay.missing_checks), (None, None, 0));

    // Now the node loses it for good. Checks at one tip height count once.
    chain.lose(&tx);
    for _ in 0..4 {
        p.step().await;
    }
    let pay = p.payment_of(inv).await;
    assert_eq!((pay.missing_since_height, pay.missing_checks), (Some(13), 1));
    // Missing over 11 new blocks (12 checks): still not reversed.
    for _ in 0..11 {
        p.mine_scripted_and_step(&chain, 1).await;
        assert_eq!(p.status(inv).await, "paid");
    }
    assert_eq!(p.balance("ethereum").await, (d("1"), d("0")));
    // The 12th block completes the span: reversed, once.
    p.mine_scripted_and_step(&chain, 1).await;
    assert_eq!(p.status(inv).await, "invalid");
    assert_eq!(p.payment_of(inv).await.status, entity::PaymentStatus::Reversed);
    p.mine_scripted_and_step(&chain, 1).await;
    let events =
        ["invoice.confirming", "invoice.paid", "balance.credited", "invoice.deposit_reversed", "invoice.invalid"];
    p.assert_outcome(inv, "ethereum", ("0", "0"), &events).await;
}

/// The span and the number of checks are configurable (`[pipeline] gone_after_blocks`,
/// `gone_min_checks`): with 2 blocks and 3 checks, three checks over two new blocks reverse.
#[tokio::test]
async fn the_gone_span_is_configurable() {
    let mut p = pipe_with(|c| {
        c.pipeline.gone_after_blocks = Some(2);
        c.pipeline.gone_min_checks = 3;
    })
    .await;
    let (chain, inv, tx) = p.scripted_eth_payment().await;
    p.step().await;
    chain.lose(&tx);
    p.step().await;
    p.mine_scripted_and_step(&chain, 1).await;
    assert_eq!(p.status(inv).await, "confirming", "two checks, one block");
    p.mine_scripted_and_step(&chain, 1).await;
    assert_eq!(p.status(inv).await, "pending", "three checks over two blocks: reversed before confirmation");
    assert_eq!(p.events(inv).await, ["invoice.confirming", "invoice.deposit_reversed"]);
    assert_eq!(p.balance("ethereum").await, (d("0"), d("0")));
}

/// Live deposit safety (SQLite, scripted chain): a credited deposit that vanished long enough to be
/// reversed and is then mined again is revived: recorded again, confirmed and credited once
/// more; the invoice, `invalid` since the reversal, takes it as a late deposit (PRODUCT.md).
#[tokio::test]
async fn a_reversed_deposit_mined_again_is_revived_and_credited_once() {
    let mut p = pipe().await;
    let (chain, inv, tx) = p.scripted_eth_payment().await;
    p.mine_scripted_and_step(&chain, 11).await;
    assert_eq!(p.status(inv).await, "paid");
    p.lose_for(&chain, &tx, 13).await;
    p.step().await;
    assert_eq!(p.payment_of(inv).await.status, entity::PaymentStatus::Reversed);
    assert_eq!(p.balance("ethereum").await, (d("0"), d("0")));

    chain.mine_again(&tx);
    p.step().await;
    let pay = p.payment_of(inv).await;
    assert_eq!(pay.status, entity::PaymentStatus::Confirming, "revived");
    assert_eq!((pay.credited_at, pay.reversed_at, pay.missing_checks), (None, None, 0));
    assert_eq!(p.balance("ethereum").await, (d("0"), d("1")), "back in pending");
    p.mine_scripted_and_step(&chain, 11).await;
    p.step().await;
    assert_eq!(p.payment_of(inv).await.status, entity::PaymentStatus::Confirmed);
    assert_eq!(p.balance("ethereum").await, (d("1"), d("0")), "credited once more, once");
    assert_eq!(p.status(inv).await, "invalid");
    assert_eq!(p.events(inv).await, testkit::REVIVED_DEPOSIT_EVENTS);
    // Seen again by a rescan, or tracked again: nothing changes.
    p.mine_scripted_and_step(&chain, 20).await;
    assert_eq!(p.balance("ethereum").await, (d("1"), d("0")));
    assert_eq!(entity::payment::Entity::find().all(&p.app.state.db).await.unwrap().len(), 1);
    p.assert_ledger("ethereum").await;
}

/// An unconfirmed deposit reversed and mined again: the invoice, back to `pending`, moves to
/// `confirming` again and is paid.
#[tokio::test]
async fn an_unconfirmed_reversed_deposit_mined_again_pays_its_invoice() {
    let mut p = pipe_with(|c| c.pipeline.gone_after_blocks = Some(2)).await;
    let (chain, inv, tx) = p.scripted_eth_payment().await;
    p.step().await;
    p.lose_for(&chain, &tx, 3).await;
    assert_eq!(p.status(inv).await, "pending");
    chain.mine_again(&tx);
    p.step().await;
    assert_eq!(p.status(inv).await, "confirming");
    p.mine_scripted_and_step(&chain, 11).await;
    assert_eq!(p.status(inv).await, "paid");
    let events =
        ["invoice.confirming", "invoice.deposit_reversed", "invoice.confirming", "invoice.paid", "balance.credited"];
    p.assert_outcome(inv, "ethereum", ("1", "0"), &events).await;
}

/// Live deposit safety: the tracker's rechecks and the sweeper agree, so a slow-confirming payment
/// keeps exactly one job chain over many sweeps. The queue is simulated: jobs due run first,
/// then the sweeper runs and its re-enqueues join the queue; the payment never has two jobs
/// queued. A job of a superseded chain ends without doing anything.
#[tokio::test]
async fn a_slow_confirming_payment_keeps_one_tracker_job_chain_over_many_sweeps() {
    use std::time::Instant;
    // polygon: 128 confirmations, so each recheck waits 60 intervals (1.2 s), far beyond the
    // sweeper's margin (200 ms).
    let p = pipe_with(|c| c.pipeline.track_interval_ms = 20).await;
    let db = &p.app.state.db;
    let cfg = &p.app.state.config.pipeline;
    let (inv, _) = p.paid_invoice("POL", "polygon", "1").await;
    let id = p.mine_and_scan("polygon", 1, 100).await[0];
    let margin = Duration::from_millis(200);
    // (due, token): the scan's hand-over starts the chain.
    let mut queue: Vec<(Instant, Option<Uuid>)> = vec![(Instant::now(), None)];
    let (mut runs, mut sweeps) = (0, 0);
    let end = Instant::now() + Duration::from_millis(4_000);
    while Instant::now() < end {
        let now = Instant::now();
        let (due, mut rest): (Vec<_>, Vec<_>) = queue.into_iter().partition(|(at, _)| *at <= now);
        for (_, token) in due {
            runs += 1;
            match tracker::track_payment_chain(db, &p.chains, cfg, id, token).await.unwrap() {
                tracker::Next::Recheck { after, token } => rest.push((Instant::now() + after, Some(token))),
                next => panic!("an unconfirmed payment's only chain ended: {next:?}"),
            }
        }
        for stale in sweeper::sweep(db, margin).await.unwrap().stale_payments {
            assert_eq!(stale, id);
            rest.push((Instant::now(), None));
        }
        sweeps += 1;
        queue = rest;
        assert_eq!(queue.len(), 1, "one live job for the payment after {runs} runs and {sweeps} sweeps");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(runs >= 3 && sweeps >= 20, "{runs} runs, {sweeps} sweeps");
    assert_eq!(p.status(inv).await, "confirming");

    // A new chain (a scan's hand-over) takes over: the older chain's job ends when it runs.
    let old = queue[0].1;
    let Next::Recheck { token, .. } = tracker::track_payment(db, &p.chains, cfg, id).await.unwrap() else {
        panic!("a recheck")
    };
    assert_eq!(tracker::track_payment_chain(db, &p.chains, cfg, id, old).await.unwrap(), Next::Superseded);
    let next = tracker::track_payment_chain(db, &p.chains, cfg, id, Some(token)).await.unwrap();
    assert!(matches!(next, Next::Recheck { .. }), "{next:?}");
    // A lost recheck (its job never runs): once overdue by the margin, the sweeper finds it.
    let overdue = chrono::Utc::now() - chrono::Duration::seconds(1);
    entity::payment::Entity::update_many()
        .col_expr(entity::payment::Column::NextCheckAt, sea_orm::sea_query::Expr::value(overdue))
        .exec(db)
        .await
        .unwrap();
    assert_eq!(sweeper::sweep(db, margin).await.unwrap().stale_payments, [id]);
}

/// Revival of a payment whose invoice converts into another asset: its conversion ended with
/// the reversal (settled, then taken back), so the revived payment is quoted afresh and
/// credited once more in the target asset.
#[tokio::test]
async fn a_revived_payment_of_a_converting_invoice_is_quoted_and_credited_again() {
    use workers::converter::{self, Converter, venue::Venues};
    let mut p = pipe().await;
    p.app.state.rates.refresh(Environment::Test).await.unwrap();
    let converter = Converter {
        db: p.app.state.db.clone(),
        venues: Venues::from_config(&p.app.state.config, p.app.state.rates.clone(), &p.app.state.db),
        quote_lock: chrono::Duration::seconds(900),
    };
    let chain = ScriptedChain::install(&mut p, "bitcoin");
    let convert = async || {
        for id in converter::due(&p.app.state.db, 100).await.unwrap() {
            converter.step(id).await.unwrap();
        }
    };
    let body = json!({"currency": "BTC", "amount_fiat": "600", "fiat_currency": "USD", "target_settlement_asset": "tron_usdt"});
    let inv = p.app.create_invoice_id(&p.key, body).await;
    let tx = chain.send(&p.address_key(inv).await, "0.01");
    p.step().await;
    convert().await;
    p.mine_scripted_and_step(&chain, 2).await;
    convert().await;
    // 0.01 BTC at 59 700 less the 0.25 % fee (sandbox venue).
    assert_eq!(p.balance("tron_usdt").await, (d("595.5075"), d("0")));
    p.lose_for(&chain, &tx, 4).await;
    assert_eq!(p.payment_of(inv).await.status, entity::PaymentStatus::Reversed);
    assert_eq!(p.balance("tron_usdt").await, (d("0"), d("0")));

    chain.mine_again(&tx);
    p.step().await;
    convert().await;
    p.mine_scripted_and_step(&chain, 2).await;
    convert().await;
    assert_eq!(p.payment_of(inv).await.credited_gate_id.as_deref(), Some("tron_usdt"));
    assert_eq!(p.balance("tron_usdt").await, (d("595.5075"), d("0")));
    assert_eq!(p.balance("bitcoin").await, (d("0"), d("0")));
    assert_eq!(p.events(inv).await, testkit::REVIVED_DEPOSIT_EVENTS);
    p.assert_ledger("tron_usdt").await;
    p.assert_ledger("bitcoin").await;
}

/// A reversed deposit whose transaction comes back at its old height, behind the scanner's
/// cursor (no rescan reads it): the tracker, still watching the reversed payment, revives it,
/// and it is credited once more.
#[tokio::test]
async fn a_reversed_deposit_back_at_its_old_height_is_revived_by_the_tracker() {
    let mut p = pipe().await;
    let (chain, inv, tx) = p.scripted_eth_payment().await;
    p.mine_scripted_and_step(&chain, 11).await;
    p.lose_for(&chain, &tx, 13).await;
    p.step().await;
    assert_eq!(p.payment_of(inv).await.status, entity::PaymentStatus::Reversed);
    assert_eq!(p.balance("ethereum").await, (d("0"), d("0")));
    // Watched, not yet given up: the chain is not final depth past the last missing check.
    let cfg = &p.app.state.config.pipeline;
    let next = tracker::track_payment(&p.app.state.db, &p.chains, cfg, p.payment_of(inv).await.id).await.unwrap();
    assert!(matches!(next, Next::Recheck { .. }), "{next:?}");

    chain.restore(&tx);
    p.mine_scripted_and_step(&chain, 1).await;
    let pay = p.payment_of(inv).await;
    assert_eq!((pay.status, pay.block_height), (entity::PaymentStatus::Confirming, Some(2)), "revived at its height");
    p.step().await;
    assert_eq!(p.payment_of(inv).await.status, entity::PaymentStatus::Confirmed);
    assert_eq!(p.balance("ethereum").await, (d("1"), d("0")));
    assert_eq!(p.events(inv).await, testkit::REVIVED_DEPOSIT_EVENTS);
    p.assert_ledger("ethereum").await;
    // Once final depth past its last missing check, a reversed payment is no longer watched.
    p.lose_for(&chain, &tx, 13).await;
    p.step().await;
    let pay = p.payment_of(inv).await;
    assert_eq!(pay.status, entity::PaymentStatus::Reversed);
    chain.mine(30);
    let next = tracker::track_payment(&p.app.state.db, &p.chains, cfg, pay.id).await.unwrap();
    assert_eq!(next, Next::Done);
}

/// The scan throughput goal: a scan records its whole batch at once (multi-row payment and event inserts, one
/// guarded update for the invoices, one balance posting per merchant), with the rules of one
/// transfer at a time: each transfer recorded once even when the node returns it twice, an
/// invoice paid twice in the batch moves to `confirming` once (caused by its first payment), an
/// invoice past its window expires first (a late deposit), every deposit its own `pending`
/// ledger entry with the running balance, and a rescan of the same blocks records nothing.
#[tokio::test]
async fn one_scan_records_a_batch_of_deposits_each_once() {
    use entity::ledger_entry;
    use sea_orm::QueryOrder;
    let mut p = pipe().await;
    let chain = ScriptedChain::install(&mut p, "ethereum");
    let (a, b, late) = (
        p.invoice("ETH", "ethereum", "1").await,
        p.invoice("ETH", "ethereum", "1").await,
        p.invoice("ETH", "ethereum", "1").await,
    );
    force_expired(&p, late).await;
    let tx_a = chain.send(&p.address_key(a).await, "1");
    chain.repeat(&tx_a);
    let tx_b1 = chain.send(&p.address_key(b).await, "0.4");
    chain.send(&p.address_key(b).await, "0.6");
    chain.send(&p.address_key(late).await, "1");
    // Another merchant's deposit in the same batch: its own balance row and posting.
    let (other, other_key) = p.app.test_key().await;
    let theirs =
        p.app.create_invoice_id(&other_key, json!({"currency": "ETH", "network": "ethereum", "amount": "2"})).await;
    chain.send(&p.address_key(theirs).await, "2");
    let db = &p.app.state.db;
    let report = scanner::scan_gate(db, chain.as_ref(), Environment::Test, 100).await.unwrap().expect("a scan");
    assert_eq!((report.transfers, report.recorded.len()), (6, 5));
    assert_eq!(entity::payment::Entity::find().all(db).await.unwrap().len(), 5);
    let (theirs_balance, _) = testkit::assert_ledger_sums(db, other, "ethereum").await;
    assert_eq!((theirs_balance.available.0, theirs_balance.pending.0), (d("0"), d("2")));
    assert_eq!(
        (p.status(a).await, p.status(b).await, p.status(late).await),
        ("confirming".into(), "confirming".into(), "expired".into())
    );
    assert_eq!(p.events(a).await, ["invoice.confirming"]);
    assert_eq!(p.events(b).await, ["invoice.confirming"]);
    assert_eq!(p.events(late).await, ["invoice.expired"]);
    let confirming = event::Entity::find()
        .filter(event::Column::EventType.eq("invoice.confirming"))
        .filter(event::Column::InvoiceId.eq(b))
        .one(db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(confirming.payload["tx_hash"], tx_b1, "the first payment of the batch moved the invoice");
    assert_eq!(confirming.payload["status"], "confirming");
    assert_eq!(p.balance("ethereum").await, (d("0"), d("3")));
    // One entry per deposit, each with the bucket's value after it, in order.
    let entries = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(p.merchant))
        .order_by_asc(ledger_entry::Column::Id)
        .all(db)
        .await
        .unwrap();
    assert_eq!(entries.len(), 4);
    let mut running = Decimal::ZERO;
    for e in &entries {
        running += e.amount.0;
        assert_eq!((e.bucket, e.balance_after.0), (entity::Bucket::Pending, running));
    }
    p.assert_ledger("ethereum").await;

    // The same blocks read again: nothing new.
    use sea_orm::sea_query::Expr;
    entity::scan_cursor::Entity::update_many()
        .col_expr(entity::scan_cursor::Column::NextHeight, Expr::value(1i64))
        .exec(db)
        .await
        .unwrap();
    let again = scanner::scan_gate(db, chain.as_ref(), Environment::Test, 100).await.unwrap().expect("a rescan");
    assert_eq!((again.transfers, again.recorded.len()), (6, 0));
    assert_eq!(entity::payment::Entity::find().all(db).await.unwrap().len(), 5);
    assert_eq!(p.balance("ethereum").await, (d("0"), d("3")));
    assert_eq!(p.events(b).await, ["invoice.confirming"]);

    // And each is credited once.
    p.mine_scripted_and_step(&chain, 12).await;
    p.step().await;
    assert_eq!(
        (p.status(a).await, p.status(b).await, p.status(late).await),
        ("paid".into(), "paid".into(), "expired".into())
    );
    assert_eq!(p.events(late).await, ["invoice.expired", "invoice.late_deposit", "balance.credited"]);
    p.assert_outcome(
        b,
        "ethereum",
        ("3", "0"),
        &["invoice.confirming", "balance.credited", "invoice.paid", "balance.credited"],
    )
    .await;
}

/// The scanner stage reads the next batch while recording the last; a batch read ahead is
/// recorded only if the cursor is still where the recorded batch left it.
#[tokio::test]
async fn a_batch_read_ahead_is_dropped_when_another_scanner_moved_the_cursor() {
    let mut p = pipe().await;
    let chain = ScriptedChain::install(&mut p, "ethereum");
    let inv = p.invoice("ETH", "ethereum", "1").await;
    chain.send(&p.address_key(inv).await, "0.5");
    chain.send(&p.address_key(inv).await, "0.5");
    let db = &p.app.state.db;
    let cursor = || async { entity::scan_cursor::Entity::find().one(db).await.unwrap().map(|c| c.next_height) };
    let mut scan = scanner::Scanner::new(db, chain.as_ref(), Environment::Test, 1);
    // Block 1 (empty) recorded, block 2 read ahead.
    let first = scan.next().await.unwrap().expect("block 1");
    assert_eq!((first.from, first.to, first.recorded.len()), (1, 1, 0));
    assert_eq!(cursor().await, Some(2));
    // Another scanner records block 2 first.
    let other = scanner::scan_gate(db, chain.as_ref(), Environment::Test, 1).await.unwrap().expect("block 2");
    assert_eq!((other.from, other.recorded.len()), (2, 1));
    // The block read ahead is not recorded again, and the cursor does not move back.
    assert!(scan.next().await.unwrap().is_none());
    assert_eq!(cursor().await, Some(3));
    // Without a read ahead it carries on from the cursor.
    let third = scan.next().await.unwrap().expect("block 3");
    assert_eq!((third.from, third.recorded.len()), (3, 1));
    assert_eq!(entity::payment::Entity::find().all(db).await.unwrap().len(), 2);
    assert_eq!(p.balance("ethereum").await, (d("0"), d("1")));
    p.assert_ledger("ethereum").await;
}

/// A deposit seen only in the mempool shows 0 confirmations until it is mined, however many
/// blocks pass without it (it is recorded at no block), then its block's depth; it is confirmed
/// at the gate's depth counted from that block.
#[tokio::test]
async fn a_mempool_deposit_shows_0_confirmations_until_it_is_mined() {
    let mut p = pipe().await;
    let chain = ScriptedChain::install(&mut p, "bitcoin");
    let inv = p.invoice("BTC", "bitcoin", "0.5").await;
    chain.send_to_mempool(&p.address_key(inv).await, "0.5");
    let db = &p.app.state.db;
    // A scan as the scanner stage runs it (blocks, then the mempool), no tracker look.
    let scan = async || {
        while scanner::scan_gate(db, chain.as_ref(), Environment::Test, 100).await.unwrap().is_some() {}
        scanner::scan_pending(db, chain.as_ref(), Environment::Test).await.unwrap()
    };
    assert_eq!(scan().await.len(), 1);
    let confirmations = async || p.get_invoice(inv).await["payments"][0]["confirmations"].clone();
    assert_eq!(p.status(inv).await, "confirming");
    assert_eq!(confirmations().await, 0, "in the mempool");
    for _ in 0..3 {
        chain.mine(1);
        scan().await;
        assert_eq!(confirmations().await, 0, "blocks without it");
    }
    assert_eq!(p.payment_of(inv).await.block_height, None, "no block yet");
    chain.mine_mempool();
    scan().await;
    assert_eq!(confirmations().await, 1, "in its block");
    assert_eq!(p.payment_of(inv).await.block_height, Some(5));
    p.mine_scripted_and_step(&chain, 1).await;
    assert_eq!((confirmations().await, p.status(inv).await), (json!(2), "confirming".to_owned()));
    p.mine_scripted_and_step(&chain, 1).await;
    p.assert_state(inv, "paid", "bitcoin", ("0.5", "0")).await;
}

/// An unclaimed deposit (ETH sent to the address of a USDT invoice on ethereum) is followed on
/// its chain: listed with its confirmations, refundable only at the gate's 12 (resolving it is
/// refused before), not while the chain does not show it, followed no more once final (24); one
/// missing over the gone span is gone (nothing to return, no longer listed) until it is mined
/// again.
#[tokio::test]
async fn an_unclaimed_deposit_is_refundable_only_at_the_gates_depth_and_while_on_the_chain() {
    use crate::support::tracking::Counting;
    use domain::unclaimed::{self, ResolveError};
    use entity::{UnclaimedReason, UnclaimedStatus};
    let mut p = pipe_with(|c| c.pipeline.gone_after_blocks = Some(2)).await;
    let chain = ScriptedChain::install(&mut p, "ethereum");
    let usdt = p.invoice("USDT", "ethereum", "10").await;
    let key = p.address_key(usdt).await;
    let tx = chain.send(&key, "0.5");
    p.step().await;
    let db = &p.app.state.db;
    let listed = async || unclaimed::list(db, Some(Environment::Test), false).await.unwrap();
    let refused = async |id: Uuid, why: &str| {
        let err = unclaimed::resolve(db, id.into(), "returned", "oscar").await.unwrap_err();
        assert!(matches!(err, ResolveError::NotRefundable(_)) && err.to_string().contains(why), "{err}");
    };
    let d = listed().await.remove(0);
    assert_eq!((d.tx_hash.as_str(), d.reason), (tx.as_str(), UnclaimedReason::OtherGate));
    assert_eq!((d.status, d.confirmations), (UnclaimedStatus::Confirming, 1));
    let shown = unclaimed::to_json(&d);
    assert_eq!(
        (&shown["confirmations"], &shown["required_confirmations"], &shown["refundable"]),
        (&json!(1), &json!(12), &json!(false))
    );
    refused(d.id, "has 1 of the 12 confirmations ethereum requires").await;

    // At the gate's depth: refundable.
    p.mine_scripted_and_step(&chain, 11).await;
    let d = listed().await.remove(0);
    assert_eq!((d.status, d.confirmations), (UnclaimedStatus::Confirmed, 12));
    assert_eq!(unclaimed::not_refundable(&d), None);
    // The chain does not show it: not refundable while it does not.
    chain.null_once(&tx);
    p.step().await;
    let d = listed().await.remove(0);
    assert!(d.missing_since_height.is_some(), "{d:?}");
    refused(d.id, "is missing from the ethereum chain").await;
    // Seen again, then past its final depth: followed no more.
    p.mine_scripted_and_step(&chain, 12).await;
    let d = listed().await.remove(0);
    assert_eq!((d.status, d.confirmations, d.missing_since_height), (UnclaimedStatus::Final, 24, None));
    let (counted, counting) = Counting::wrap(&p.chains, Environment::Test, "ethereum");
    let cfg = &p.app.state.config.pipeline;
    assert_eq!(tracker::follow_unclaimed(db, &counted, cfg).await.unwrap(), 0);
    assert_eq!(counting.looks(), 0, "a final deposit is not looked at");
    unclaimed::resolve(db, d.id.into(), "returned in tx 0xabc", "oscar").await.unwrap();
    assert!(listed().await.is_empty(), "resolved");

    // Another the chain loses for good (2 blocks, 3 checks): gone, not listed, nothing to return.
    let lost = chain.send(&key, "0.25");
    p.step().await;
    p.lose_for(&chain, &lost, 4).await;
    assert!(listed().await.is_empty(), "gone: not listed");
    let all = unclaimed::list(db, Some(Environment::Test), true).await.unwrap();
    let gone = all.iter().find(|d| d.tx_hash == lost).unwrap();
    assert_eq!(gone.status, UnclaimedStatus::Gone);
    refused(gone.id, "is gone from the ethereum chain").await;
    // Mined again: followed again.
    chain.mine_again(&lost);
    p.step().await;
    let d = listed().await.remove(0);
    assert_eq!((d.tx_hash.as_str(), d.status, d.confirmations), (lost.as_str(), UnclaimedStatus::Confirming, 1));
}
