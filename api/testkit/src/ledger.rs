//! Balances and credits set up or checked directly in the database: funds, payout settings,
//! invoices credited as the pipeline would, and the ledger's sums.

use entity::Environment;
use uuid::Uuid;

use crate::{TestApp, d};

/// A manual ledger adjustment of `amount` (signed) on `merchant`'s `gate` balance in `env`.
pub async fn adjust(
    db: &impl domain::db::WriteDb,
    merchant: Uuid,
    env: Environment,
    gate: &str,
    amount: &str,
    reason: &str,
) {
    let g = domain::gates::find(gate).unwrap_or_else(|| panic!("no gate {gate}"));
    let amount: rust_decimal::Decimal = amount.parse().expect("amount");
    domain::ledger::adjust(db, merchant.into(), env, g, amount, reason).await.expect("ledger adjustment");
}

/// Funds `merchant`'s `gate` balance in `env` with `amount` (an [`adjust`]ment, reason "fund").
pub async fn fund(db: &impl domain::db::WriteDb, merchant: Uuid, env: Environment, gate: &str, amount: &str) {
    adjust(db, merchant, env, gate, amount, "fund").await;
}

/// `merchant`'s payout settings in `env` (the defaults when never saved), changed by `f` and
/// saved; returns what was saved.
pub async fn set_payout_settings(
    db: &sea_orm::DatabaseConnection,
    merchant: Uuid,
    env: Environment,
    f: impl FnOnce(&mut entity::merchant_env_settings::Model),
) -> entity::merchant_env_settings::Model {
    let mut s = domain::payouts::service::settings(db, merchant.into(), env).await.expect("payout settings");
    f(&mut s);
    domain::payouts::service::save_settings(db, s.clone()).await.expect("save payout settings");
    s
}

/// Payouts approved at once and executable without delay, with both of their fees charged to
/// the merchant.
pub async fn auto_approve_payouts_merchant_pays(db: &sea_orm::DatabaseConnection, merchant: Uuid, env: Environment) {
    set_payout_settings(db, merchant, env, |s| {
        s.payout_auto_approve = true;
        s.payout_delay_secs = 0;
        s.network_fee_allocation = entity::FeeAllocation::Merchant;
        s.payout_fee_allocation = entity::FeeAllocation::Merchant;
    })
    .await;
}

/// The credit row of `invoice` in `gate` (what it credited, what was refunded).
pub async fn invoice_credit(
    db: &sea_orm::DatabaseConnection,
    invoice: Uuid,
    gate: &str,
) -> entity::invoice_credit::Model {
    use sea_orm::EntityTrait;
    let row = entity::invoice_credit::Entity::find_by_id((invoice, gate.to_owned())).one(db).await.expect("credit");
    row.unwrap_or_else(|| panic!("no {gate} credit for invoice {invoice}"))
}

/// The ledger of the gate a payment of `amount` came in on, once it confirmed and a settlement
/// conversion took it: credited pending, moved to available, then debited by the conversion.
pub fn converted_source_entries(amount: &str) -> [(entity::EntryType, entity::Bucket, rust_decimal::Decimal); 4] {
    use entity::{Bucket, EntryType};
    [
        (EntryType::InvoiceCredit, Bucket::Pending, d(amount)),
        (EntryType::InvoiceCredit, Bucket::Pending, -d(amount)),
        (EntryType::InvoiceCredit, Bucket::Available, d(amount)),
        (EntryType::ConversionDebit, Bucket::Available, -d(amount)),
    ]
}

/// Records a confirmed payment of `amount` to the invoice and credits it through the ledger's
/// crediting service (what the confirmation tracker does), returning the payment id.
pub async fn credit_invoice(app: &TestApp, merchant: Uuid, invoice_id: Uuid, gate: &str, amount: &str) -> Uuid {
    credit_invoice_on(&app.state.db, merchant, invoice_id, gate, amount).await
}

/// [`credit_invoice`] on any connection (the end-to-end suites have no in-process app).
pub async fn credit_invoice_on(
    db: &sea_orm::DatabaseConnection,
    merchant: Uuid,
    invoice_id: Uuid,
    gate: &str,
    amount: &str,
) -> Uuid {
    credit_invoice_in(db, Environment::Test, merchant, invoice_id, gate, amount).await
}

/// [`credit_invoice_on`] for an invoice of `environment`.
pub async fn credit_invoice_in(
    db: &sea_orm::DatabaseConnection,
    environment: Environment,
    merchant: Uuid,
    invoice_id: Uuid,
    gate: &str,
    amount: &str,
) -> Uuid {
    use sea_orm::{ActiveModelTrait, IntoActiveModel, TransactionTrait};
    let amount: rust_decimal::Decimal = amount.parse().expect("amount");
    let now = chrono::Utc::now();
    let tx_hash = format!("test-{}", Uuid::new_v4().simple());
    let detected = entity::payment::Model::detected(
        invoice_id,
        environment,
        gate.into(),
        tx_hash,
        0,
        entity::Amount::new(amount),
        now,
    );
    let payment = entity::payment::Model {
        confirmations: 1,
        required_confirmations: 1,
        status: entity::PaymentStatus::Confirmed,
        block_height: Some(1),
        confirmed_at: Some(now),
        ..detected
    };
    let txn = db.begin().await.expect("begin");
    let payment = payment.into_active_model().insert(&txn).await.expect("payment");
    let credit =
        domain::ledger::Credit { payment: &payment, merchant_id: merchant, gate, amount, release_pending: false };
    let credited = domain::ledger::credit_payment(&txn, &credit).await.expect("credit");
    assert!(credited, "a fresh payment is credited");
    // A second credit of the same payment is refused without writing anything.
    assert!(!domain::ledger::credit_payment(&txn, &credit).await.expect("re-credit"));
    // As the tracker does: the credit's fiat value, in its transaction.
    use sea_orm::EntityTrait;
    let stamped = entity::payment::Entity::find_by_id(payment.id).one(&txn).await.expect("read").expect("payment");
    let inv = entity::invoice::Entity::find_by_id(invoice_id).one(&txn).await.expect("read").expect("invoice");
    domain::payments::fiat::record(&txn, &[(&stamped, &inv)]).await.expect("fiat value");
    txn.commit().await.expect("commit");
    payment.id
}

/// Asserts that every bucket of the merchant's balance in `gate` equals the sum of its ledger
/// entries, and returns the balance with those entries.
pub async fn assert_ledger_sums(
    db: &sea_orm::DatabaseConnection,
    merchant: Uuid,
    gate: &str,
) -> (entity::balance::Model, Vec<entity::ledger_entry::Model>) {
    use entity::{Bucket, balance, ledger_entry};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let b = balance::Entity::find()
        .filter(balance::Column::MerchantId.eq(merchant))
        .filter(balance::Column::GateId.eq(gate))
        .one(db)
        .await
        .expect("balance")
        .expect("a balance row");
    let entries = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(merchant))
        .filter(ledger_entry::Column::GateId.eq(gate))
        .all(db)
        .await
        .expect("entries");
    let sum = |bucket| entries.iter().filter(|e| e.bucket == bucket).map(|e| e.amount.0).sum::<rust_decimal::Decimal>();
    assert_eq!(sum(Bucket::Available), b.available.0, "available");
    assert_eq!(sum(Bucket::Pending), b.pending.0, "pending");
    assert_eq!(sum(Bucket::Reserved), b.reserved.0, "reserved");
    (b, entries)
}
