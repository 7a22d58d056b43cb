//! Property test over the money services: random sequences of credits, payouts, cancels,
//! approvals and rejections against a simple model. After every step the balance matches the
//! model, the reserved bucket equals the debits of the payouts still holding a reservation, and
//! every bucket equals the sum of its ledger entries. Refunds draw on one invoice's credit:
//! they are accepted exactly when the model says the credit (minus live refunds) and the balance
//! cover them, and a cancelled or rejected refund's amount becomes refundable again.

use std::collections::HashMap;

use api::auth::{Permissions, Principal};
use domain::config::GateFees;
use domain::payouts::service::{self, Created};
use domain::payouts::types::CreatePayoutRequest;
use domain::refunds::service as refunds;
use domain::refunds::types::CreateRefundRequest;
use entity::{Environment, FeeAllocation, PayoutId, PayoutStatus, RefundId};
use proptest::prelude::*;
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use testkit::TestApp;
use uuid::Uuid;

#[derive(Debug, Clone)]
enum Op {
    Credit(u32),
    InvoiceCredit(u32),
    Payout(u32),
    Refund(u32),
    Cancel(usize),
    Approve(usize),
    Reject(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u32..200).prop_map(Op::Credit),
        (1u32..200).prop_map(Op::InvoiceCredit),
        (1u32..120).prop_map(Op::Payout),
        (1u32..120).prop_map(Op::Refund),
        (0usize..8).prop_map(Op::Cancel),
        (0usize..8).prop_map(Op::Approve),
        (0usize..8).prop_map(Op::Reject),
    ]
}

async fn balance_and_entries(app: &TestApp, m: Uuid) -> ([Decimal; 2], [Decimal; 2]) {
    let b = entity::balance::Entity::find()
        .filter(entity::balance::Column::MerchantId.eq(m))
        .filter(entity::balance::Column::GateId.eq("tron_usdt"))
        .one(&app.state.db)
        .await
        .unwrap()
        .map_or([Decimal::ZERO; 2], |b| [b.available.0, b.reserved.0]);
    let entries = entity::ledger_entry::Entity::find()
        .filter(entity::ledger_entry::Column::MerchantId.eq(m))
        .filter(entity::ledger_entry::Column::GateId.eq("tron_usdt"))
        .all(&app.state.db)
        .await
        .unwrap();
    let sum = |bucket| entries.iter().filter(|e| e.bucket == bucket).map(|e| e.amount.0).sum::<Decimal>();
    (b, [sum(entity::Bucket::Available), sum(entity::Bucket::Reserved)])
}

#[test]
fn money_services_keep_the_ledger_consistent() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let app = rt.block_on(TestApp::spawn_with(|c| {
        c.fees.insert(
            "tron_usdt".into(),
            GateFees { payout_fee: Decimal::ONE, network_fee: Decimal::TWO, refund_fee: Decimal::TEN },
        );
    }));
    let cases = if cfg!(feature = "pg-tests") { 12 } else { 32 };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases, ..ProptestConfig::default() });
    runner
        .run(&(proptest::collection::vec(op(), 1..30), any::<bool>()), |(ops, merchant_pays_fees)| {
            rt.block_on(async {
                let m = app.merchant().await;
                let who = Principal {
                    key_id: Uuid::nil().into(),
                    merchant_id: m.into(),
                    environment: Environment::Test,
                    permissions: Permissions::all(),
                    user_id: None,
                };
                let alloc = if merchant_pays_fees { FeeAllocation::Merchant } else { FeeAllocation::Customer };
                let mut s = service::settings(&app.state.db, m.into(), Environment::Test).await.unwrap();
                (s.payout_fee_allocation, s.network_fee_allocation, s.refund_fee_allocation) = (alloc, alloc, alloc);
                service::save_settings(&app.state.db, s).await.unwrap();
                let gate = domain::gates::find("tron_usdt").unwrap();

                let mut available = Decimal::ZERO;
                let mut payouts: Vec<Uuid> = Vec::new();
                let mut model_status: HashMap<Uuid, (PayoutStatus, Decimal)> = HashMap::new();
                // The invoice refunds draw on: what it credited, what live refunds took, and
                // which payouts are refunds (payout id -> refund id, amount).
                let key = app.key(m, Environment::Test, &[]).await;
                let invoice: Uuid = app
                    .create_invoice(&key, serde_json::json!({"currency": "USDT", "network": "tron", "amount": "50"}))
                    .await["id"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                let (mut credited, mut refunded) = (Decimal::ZERO, Decimal::ZERO);
                let mut refund_of: HashMap<Uuid, (Uuid, Decimal)> = HashMap::new();
                for (step, op) in ops.iter().enumerate() {
                    match *op {
                        Op::Credit(n) => {
                            domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, gate, Decimal::from(n), "credit")
                                .await
                                .unwrap();
                            available += Decimal::from(n);
                        }
                        Op::InvoiceCredit(n) => {
                            testkit::credit_invoice(&app, m, invoice, "tron_usdt", &n.to_string()).await;
                            available += Decimal::from(n);
                            credited += Decimal::from(n);
                        }
                        Op::Refund(n) => {
                            let amount = Decimal::from(n);
                            let debit = if merchant_pays_fees { amount + Decimal::from(12) } else { amount };
                            let body = serde_json::json!({
                                "invoice_id": invoice, "currency": "USDT", "network": "tron",
                                "amount": n.to_string(), "destination": "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP",
                            });
                            let req: CreateRefundRequest = serde_json::from_value(body.clone()).unwrap();
                            let within_credit = credited > Decimal::ZERO && amount <= credited - refunded;
                            let covers_fees = merchant_pays_fees || amount > Decimal::from(12);
                            let idem = format!("r{step}");
                            match refunds::create(&app.state, &who, &idem, &req, &body).await {
                                Ok(refunds::Created::New(r, p)) => {
                                    assert!(
                                        within_credit && covers_fees && debit <= available,
                                        "{op:?} accepted: credited {credited}, refunded {refunded}, available {available}"
                                    );
                                    assert_eq!(p.merchant_debit_amount.0, debit);
                                    available -= debit;
                                    refunded += amount;
                                    payouts.push(p.id);
                                    model_status.insert(p.id, (PayoutStatus::PendingApproval, debit));
                                    refund_of.insert(p.id, (r.id, amount));
                                }
                                Ok(refunds::Created::Replayed(..)) => panic!("every refund has a new key"),
                                Err(e) => {
                                    let expected = if !within_credit {
                                        "RefundExceedsCredit"
                                    } else if !covers_fees {
                                        "AmountOutOfRange"
                                    } else {
                                        "InsufficientBalance"
                                    };
                                    assert_eq!(format!("{:?}", e.code), expected, "{op:?}: {}", e.message);
                                    assert!(!within_credit || !covers_fees || debit > available);
                                }
                            }
                        }
                        Op::Payout(n) => {
                            let amount = Decimal::from(n);
                            let debit = if merchant_pays_fees { amount + Decimal::from(3) } else { amount };
                            let req = CreatePayoutRequest {
                                currency: Some("tron_usdt".into()),
                                amount: Some(n.to_string()),
                                destination: Some("TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP".into()),
                                ..Default::default()
                            };
                            let covers_fees = merchant_pays_fees || amount > Decimal::from(3);
                            match service::create(&app.state, &who, &req).await {
                                Ok(Created::New(p)) => {
                                    assert!(
                                        covers_fees && debit <= available,
                                        "{op:?} accepted with {available} available"
                                    );
                                    assert_eq!(p.merchant_debit_amount.0, debit);
                                    available -= debit;
                                    payouts.push(p.id);
                                    model_status.insert(p.id, (PayoutStatus::PendingApproval, debit));
                                }
                                Ok(Created::Replayed(_)) => panic!("no idempotency key was sent"),
                                Err(e) => {
                                    let expected =
                                        if !covers_fees { "AmountOutOfRange" } else { "InsufficientBalance" };
                                    assert_eq!(format!("{:?}", e.code), expected, "{op:?}: {}", e.message);
                                    assert!(!covers_fees || debit > available);
                                }
                            }
                        }
                        Op::Cancel(i) | Op::Approve(i) | Op::Reject(i) => {
                            let Some(&id) = payouts.get(i) else { continue };
                            let (status, debit) = model_status[&id];
                            match *op {
                                Op::Cancel(_) => {
                                    let res = service::cancel(&app.state, &who, id.into()).await;
                                    let cancellable =
                                        matches!(status, PayoutStatus::PendingApproval | PayoutStatus::Approved);
                                    assert_eq!(res.is_ok(), cancellable, "{op:?} from {status:?}");
                                    if cancellable {
                                        available += debit;
                                        refunded -= refund_of.get(&id).map_or(Decimal::ZERO, |r| r.1);
                                        model_status.insert(id, (PayoutStatus::Cancelled, debit));
                                    }
                                }
                                Op::Approve(_) => {
                                    let res = domain::payouts::operator::approve(&app.state.db, id.into()).await;
                                    assert_eq!(
                                        res.is_ok(),
                                        status == PayoutStatus::PendingApproval,
                                        "{op:?} from {status:?}"
                                    );
                                    if res.is_ok() {
                                        model_status.insert(id, (PayoutStatus::Approved, debit));
                                    }
                                }
                                _ => {
                                    let res = domain::payouts::operator::reject(&app.state.db, id.into(), "property test").await;
                                    assert_eq!(
                                        res.is_ok(),
                                        status == PayoutStatus::PendingApproval,
                                        "{op:?} from {status:?}"
                                    );
                                    if res.is_ok() {
                                        available += debit;
                                        refunded -= refund_of.get(&id).map_or(Decimal::ZERO, |r| r.1);
                                        model_status.insert(id, (PayoutStatus::Failed, debit));
                                    }
                                }
                            }
                        }
                    }
                    let reserved: Decimal =
                        model_status.values().filter(|(s, _)| s.holds_reservation()).map(|(_, d)| *d).sum();
                    let (balance, sums) = balance_and_entries(&app, m).await;
                    assert_eq!(balance, [available, reserved], "after {op:?}");
                    assert_eq!(sums, balance, "ledger sums differ from the balance row after {op:?}");
                    assert!(balance[0] >= Decimal::ZERO && balance[1] >= Decimal::ZERO);
                    if let Some(c) = entity::invoice_credit::Entity::find_by_id((invoice, "tron_usdt".to_owned()))
                        .one(&app.state.db)
                        .await
                        .unwrap()
                    {
                        assert_eq!((c.credited.0, c.refunded.0), (credited, refunded), "invoice credit after {op:?}");
                    }
                }
                // The stored statuses match the model.
                for (id, (status, _)) in &model_status {
                    assert_eq!(service::get(&app.state, &who, PayoutId::from(*id)).await.unwrap().status, *status);
                    if let Some((refund_id, _)) = refund_of.get(id) {
                        let (r, _) = domain::refunds::service::get(&app.state, &who, RefundId::from(*refund_id)).await.unwrap();
                        assert_eq!(r.status, entity::RefundStatus::mirroring(*status));
                    }
                }
            });
            Ok(())
        })
        .unwrap();
}

proptest! {
    /// Amount strings are parsed exactly: every decimal's own text reads back as the same value
    /// (scale included), and a string with more significant digits than a decimal holds (29 or
    /// more, not counting leading zeros or trailing zeros of the fraction) is refused, never
    /// rounded to a nearby value.
    #[test]
    fn amount_strings_parse_exactly_or_not_at_all(
        mantissa in any::<i64>(),
        scale in 0u32..=28,
        digits in "[1-9][0-9]{28,40}",
        point in 1usize..28,
    ) {
        let d = Decimal::new(mantissa, scale.min(28));
        let back = entity::Amount::parse_exact(&d.to_string()).unwrap();
        prop_assert_eq!(back.0, d);
        prop_assert_eq!(back.0.scale(), d.scale());
        // A fraction with 29+ significant digits, e.g. 1234….5678 with the point inside.
        let s = format!("{}.{}1", &digits[..point], &digits[point..]);
        prop_assert!(entity::Amount::parse_exact(&s).is_err(), "{} was accepted", s);
        let amount = domain::invoices::validate::parse_amount("amount", &s);
        prop_assert!(s.len() > 50 || amount.is_err(), "{} was accepted as {:?}", s, amount);
    }
}
