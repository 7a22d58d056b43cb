//! Accounting exports: a merchant's invoices, payments, ledger entries or payouts created in a
//! date range, as CSV, streamed (`GET /v1/exports/{kind}`, permission `exports:read`; the
//! dashboard reuses [`csv_stream`]).
//!
//! - Rows are read in keyset pages (`ORDER BY created_at, id`, the next page after the last
//!   row's `(created_at, id)`), each page one short read written into its own chunk, so memory
//!   stays flat however long the range. No transaction spans the stream: the export is not a
//!   point-in-time snapshot (a row changed while it streams shows as it was when its page was
//!   read; rows are never skipped or repeated, since the order is total and keys never change).
//! - Amounts are exact decimal strings, timestamps RFC 3339 UTC with milliseconds.
//! - Free text (descriptions, external ids, metadata, destination tags, failure reasons) that
//!   starts with `=`, `+`, `-`, `@`, a tab or a carriage return is prefixed with `'`, so a
//!   spreadsheet does not run it as a formula ([`guard`]). Amounts are never altered.
//! - "Fiat value at the time of credit": a fiat-priced invoice locks its `exchange_rate` (fiat
//!   per unit of the invoice's asset) and every credit of it in that asset is valued at that
//!   rate: `amount × exchange_rate`, rounded half away from zero to cents. Nothing records a rate
//!   when a crypto-priced invoice or a static-address deposit is credited (the crediting
//!   workers hold no rate cache), so those values are blank.

use std::borrow::Cow;
use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use entity::{Amount, Bucket, EntryType, Environment, MerchantId, invoice, ledger_entry, payment, payout};
use futures::Stream;
use rust_decimal::Decimal;
use sea_orm::sea_query::{Condition, SimpleExpr};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, JoinType, QueryFilter, QueryOrder, QuerySelect, RelationTrait, Select,
};
use uuid::Uuid;

use crate::domain_error::{DomainError, DomainResult};
use crate::invoices::types::ts;
use crate::payments::fiat::{self, FiatAtCredit};

/// Rows per page (one database read and one chunk of the response each).
pub const PAGE_SIZE: u64 = 500;

/// The longest range one export covers.
pub const MAX_RANGE_DAYS: i64 = 400;

/// What an export lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExportKind {
    Invoices,
    Payments,
    LedgerEntries,
    Payouts,
}

impl ExportKind {
    pub const ALL: [ExportKind; 4] =
        [ExportKind::Invoices, ExportKind::Payments, ExportKind::LedgerEntries, ExportKind::Payouts];

    pub fn as_str(self) -> &'static str {
        match self {
            ExportKind::Invoices => "invoices",
            ExportKind::Payments => "payments",
            ExportKind::LedgerEntries => "ledger_entries",
            ExportKind::Payouts => "payouts",
        }
    }

    pub fn parse(s: &str) -> Option<ExportKind> {
        ExportKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// 400 naming `kind` for anything but the four kinds.
    pub fn parse_field(s: &str) -> DomainResult<ExportKind> {
        ExportKind::parse(s).ok_or_else(|| {
            DomainError::invalid_field(
                "kind",
                format!("must be one of invoices, payments, ledger_entries, payouts, got {s:?}"),
            )
        })
    }

    /// The header row.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            ExportKind::Invoices => &[
                "id",
                "created_at",
                "status",
                "source",
                "external_id",
                "description",
                "gate",
                "currency",
                "network",
                "amount_requested",
                "amount_paid",
                "fiat_currency",
                "amount_fiat",
                "exchange_rate",
                "fiat_value_paid",
                "amount_usd",
                "base_currency",
                "amount_in_base_currency",
                "static_address_id",
                "expires_at",
                "paid_at",
                "cancelled_at",
                "metadata",
            ],
            ExportKind::Payments => &[
                "id",
                "created_at",
                "invoice_id",
                "static_address_id",
                "external_id",
                "gate",
                "tx_hash",
                "output_index",
                "amount",
                "status",
                "confirmations",
                "confirmed_at",
                "credited_at",
                "credited_gate",
                "credited_amount",
                "reversed_at",
                "fiat_currency",
                "fiat_rate",
                "fiat_value_at_credit",
            ],
            ExportKind::LedgerEntries => &[
                "id",
                "created_at",
                "gate",
                "bucket",
                "entry_type",
                "amount",
                "balance_after",
                "reference_type",
                "reference_id",
                "description",
                "fiat_currency",
                "fiat_rate",
                "fiat_value_at_credit",
            ],
            ExportKind::Payouts => &[
                "id",
                "created_at",
                "status",
                "gate",
                "currency",
                "network",
                "amount",
                "fee_amount",
                "network_fee",
                "merchant_debit_amount",
                "recipient_amount",
                "destination",
                "destination_tag",
                "tx_hash",
                "description",
                "failure_reason",
                "approved_at",
                "completed_at",
                "cancelled_at",
                "metadata",
            ],
        }
    }

    /// The download's file name: `<kind>-<from>-<to>.csv` (dates when both bounds are
    /// midnights, else `YYYYMMDDTHHMMSSZ`).
    pub fn file_name(self, from: DateTime<Utc>, to: DateTime<Utc>) -> String {
        let both_dates = from.time() == NaiveTime::MIN && to.time() == NaiveTime::MIN;
        let f = |t: DateTime<Utc>| {
            if both_dates { t.format("%Y-%m-%d").to_string() } else { t.format("%Y%m%dT%H%M%SZ").to_string() }
        };
        format!("{}-{}-{}.csv", self.as_str(), f(from), f(to))
    }
}

/// One bound: an RFC 3339 timestamp or a `YYYY-MM-DD` date (its midnight UTC).
fn parse_bound(field: &str, value: Option<&str>) -> Result<DateTime<Utc>, String> {
    let Some(v) = value else {
        return Err(format!("{field}: required (an RFC 3339 timestamp or a YYYY-MM-DD date)"));
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(t.with_timezone(&Utc));
    }
    if v.len() == 10
        && let Ok(d) = NaiveDate::parse_from_str(v, "%Y-%m-%d")
    {
        return Ok(d.and_time(NaiveTime::MIN).and_utc());
    }
    Err(format!("{field}: must be an RFC 3339 timestamp or a YYYY-MM-DD date, got {v:?}"))
}

/// The range `[from, to)`: both required, `from` before `to`, at most [`MAX_RANGE_DAYS`] days.
/// 400 naming each bad field.
pub fn parse_range(from: Option<&str>, to: Option<&str>) -> DomainResult<(DateTime<Utc>, DateTime<Utc>)> {
    let (f, t) = (parse_bound("from", from), parse_bound("to", to));
    let (f, t) = match (f, t) {
        (Ok(f), Ok(t)) => (f, t),
        (f, t) => return Err(DomainError::validation([f.err(), t.err()].into_iter().flatten().collect())),
    };
    if f >= t {
        return Err(DomainError::invalid_field("to", "must be after from (to is exclusive)"));
    }
    if t - f > chrono::Duration::days(MAX_RANGE_DAYS) {
        return Err(DomainError::invalid_field("to", format!("at most {MAX_RANGE_DAYS} days after from")));
    }
    Ok((f, t))
}

/// Free text as a spreadsheet shows it, never runs it: a cell starting with `=`, `+`, `-`, `@`,
/// a tab or a carriage return gets a leading `'`.
pub fn guard(s: &str) -> Cow<'_, str> {
    match s.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => Cow::Owned(format!("'{s}")),
        _ => Cow::Borrowed(s),
    }
}

fn text(s: Option<&str>) -> String {
    s.map(|s| guard(s).into_owned()).unwrap_or_default()
}

fn amount(a: Option<Amount>) -> String {
    a.map(|a| a.0.to_string()).unwrap_or_default()
}

fn time(t: Option<DateTime<Utc>>) -> String {
    t.map(ts).unwrap_or_default()
}

fn json(v: Option<&serde_json::Value>) -> String {
    v.map(|v| guard(&v.to_string()).into_owned()).unwrap_or_default()
}

/// A credited payment's fiat value: as recorded with its credit (`payments::fiat`) or, for a
/// credit made before values were recorded, the rate its fiat-priced invoice locked for the
/// credited asset.
pub fn fiat_at_credit(p: &payment::Model, inv: Option<&invoice::Model>) -> Option<FiatAtCredit> {
    p.credited_at?;
    if let Some(recorded) = fiat::recorded(p) {
        return Some(recorded);
    }
    let (inv, gate, amount) = (inv?, p.credited_gate_id.as_deref()?, p.credited_amount?.0);
    let (fiat, rate) = (inv.fiat_currency.as_ref()?, inv.exchange_rate?);
    if inv.gate_id.as_deref() != Some(gate) {
        return None;
    }
    let value = amount.checked_mul(rate.0)?;
    Some(FiatAtCredit { currency: fiat.clone(), rate, value: Amount::fiat(value) })
}

/// The fiat value of a ledger entry that brought `p`'s credit in: `amount` in the credited asset
/// at the rate of the credit (the same as the payment's value when it is the whole credit).
fn entry_fiat(p: &payment::Model, inv: Option<&invoice::Model>, gate: &str, amount: Decimal) -> Option<FiatAtCredit> {
    if p.credited_gate_id.as_deref() != Some(gate) {
        return None;
    }
    let credit = fiat_at_credit(p, inv)?;
    let value = if Some(amount) == p.credited_amount.map(|a| a.0) {
        credit.value
    } else {
        Amount::fiat(amount.checked_mul(credit.rate.0)?)
    };
    Some(FiatAtCredit { value, ..credit })
}

fn fiat_cells(f: Option<FiatAtCredit>) -> [String; 3] {
    match f {
        Some(f) => [f.currency, f.rate.0.to_string(), f.value.0.to_string()],
        None => Default::default(),
    }
}

fn writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new())
}

fn finish(w: csv::Writer<Vec<u8>>) -> DomainResult<Vec<u8>> {
    w.into_inner().map_err(|e| DomainError::internal(format!("csv: {}", e.error())))
}

fn csv_err(e: csv::Error) -> DomainError {
    DomainError::internal(format!("csv: {e}"))
}

/// The header row as CSV.
pub fn header(kind: ExportKind) -> DomainResult<Vec<u8>> {
    let mut w = writer();
    w.write_record(kind.columns()).map_err(csv_err)?;
    finish(w)
}

/// Where the last page ended.
type Cursor = (DateTime<Utc>, Uuid);

/// The rows of one table created in `[from, to)` after `after`, in `(created_at, id)` order.
fn window<E: EntityTrait>(
    q: Select<E>,
    (created, id): (E::Column, E::Column),
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    after: Option<Cursor>,
    limit: u64,
) -> Select<E> {
    let mut q = q.filter(created.gte(from)).filter(created.lt(to));
    if let Some((at, last)) = after {
        let next: SimpleExpr = created.gt(at);
        q = q.filter(Condition::any().add(next).add(Condition::all().add(created.eq(at)).add(id.gt(last))));
    }
    q.order_by_asc(created).order_by_asc(id).limit(limit)
}

/// Invoices by id (one read), for the payments or credits of a page.
async fn invoices_by_id(db: &DatabaseConnection, ids: Vec<Uuid>) -> DomainResult<HashMap<Uuid, invoice::Model>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = invoice::Entity::find().filter(invoice::Column::Id.is_in(ids)).all(db).await?;
    Ok(rows.into_iter().map(|i| (i.id, i)).collect())
}

/// One page: its CSV rows, the cursor after its last row and how many rows it held.
async fn page(
    db: &DatabaseConnection,
    merchant: Uuid,
    env: Environment,
    kind: ExportKind,
    range: (DateTime<Utc>, DateTime<Utc>),
    after: Option<Cursor>,
    limit: u64,
) -> DomainResult<(Vec<u8>, Option<Cursor>, u64)> {
    let mut w = writer();
    let (last, n) = match kind {
        ExportKind::Invoices => {
            use invoice::Column as C;
            let q = invoice::Entity::find().filter(C::MerchantId.eq(merchant)).filter(C::Environment.eq(env));
            let rows = window(q, (C::CreatedAt, C::Id), range, after, limit).all(db).await?;
            for i in &rows {
                let paid = i.exchange_rate.and_then(|r| i.amount_paid.0.checked_mul(r.0)).map(Amount::fiat);
                let paid = if i.fiat_currency.is_some() { paid } else { None };
                w.write_record([
                    i.id.to_string(),
                    ts(i.created_at),
                    i.status.as_str().to_owned(),
                    i.source.clone(),
                    text(i.external_id.as_deref()),
                    text(i.description.as_deref()),
                    i.gate_id.clone().unwrap_or_default(),
                    i.currency.clone().unwrap_or_default(),
                    i.network.clone().unwrap_or_default(),
                    amount(i.amount_requested),
                    amount(Some(i.amount_paid)),
                    i.fiat_currency.clone().unwrap_or_default(),
                    amount(i.amount_fiat),
                    amount(i.exchange_rate),
                    amount(paid),
                    amount(i.amount_usd),
                    i.base_currency.clone().unwrap_or_default(),
                    amount(i.amount_in_base_currency),
                    i.static_address_id.map(|s| s.to_string()).unwrap_or_default(),
                    time(i.expires_at),
                    time(i.paid_at),
                    time(i.cancelled_at),
                    json(i.metadata.as_ref()),
                ])
                .map_err(csv_err)?;
            }
            (rows.last().map(|r| (r.created_at, r.id)), rows.len())
        }
        ExportKind::Payments => {
            use payment::Column as C;
            let q = payment::Entity::find()
                .join(JoinType::InnerJoin, payment::Relation::Invoice.def())
                .filter(invoice::Column::MerchantId.eq(merchant))
                .filter(C::Environment.eq(env));
            let rows = window(q, (C::CreatedAt, C::Id), range, after, limit).all(db).await?;
            let invoices = invoices_by_id(db, rows.iter().map(|p| p.invoice_id).collect()).await?;
            for p in &rows {
                let inv = invoices.get(&p.invoice_id);
                let fiat = fiat_at_credit(p, inv);
                let [fiat_currency, rate, value] = fiat_cells(fiat);
                w.write_record([
                    p.id.to_string(),
                    ts(p.created_at),
                    p.invoice_id.to_string(),
                    inv.and_then(|i| i.static_address_id).map(|s| s.to_string()).unwrap_or_default(),
                    text(inv.and_then(|i| i.external_id.as_deref())),
                    p.gate_id.clone(),
                    p.tx_hash.clone(),
                    p.output_index.to_string(),
                    amount(Some(p.amount)),
                    p.status.as_str().to_owned(),
                    p.confirmations.to_string(),
                    time(p.confirmed_at),
                    time(p.credited_at),
                    p.credited_gate_id.clone().unwrap_or_default(),
                    amount(p.credited_amount),
                    time(p.reversed_at),
                    fiat_currency,
                    rate,
                    value,
                ])
                .map_err(csv_err)?;
            }
            (rows.last().map(|r| (r.created_at, r.id)), rows.len())
        }
        ExportKind::LedgerEntries => {
            use ledger_entry::Column as C;
            let q = ledger_entry::Entity::find().filter(C::MerchantId.eq(merchant)).filter(C::Environment.eq(env));
            let rows = window(q, (C::CreatedAt, C::Id), range, after, limit).all(db).await?;
            // The credits' payments and invoices, for their fiat value (two reads per page): the
            // entries that brought a payment's credit in (in the paid asset, or a conversion's
            // target).
            let credit = |e: &ledger_entry::Model| {
                let into_balance = match e.entry_type {
                    EntryType::InvoiceCredit => e.bucket == Bucket::Available,
                    EntryType::ConversionCredit => true,
                    _ => false,
                };
                into_balance && e.amount.0 > Decimal::ZERO && e.reference_type.as_deref() == Some("payment")
            };
            let payment_ids: Vec<Uuid> = rows.iter().filter(|e| credit(e)).filter_map(|e| e.reference_id).collect();
            let payments: HashMap<Uuid, payment::Model> = if payment_ids.is_empty() {
                HashMap::new()
            } else {
                let ps = payment::Entity::find().filter(payment::Column::Id.is_in(payment_ids)).all(db).await?;
                ps.into_iter().map(|p| (p.id, p)).collect()
            };
            let invoices = invoices_by_id(db, payments.values().map(|p| p.invoice_id).collect()).await?;
            for e in &rows {
                let fiat = e
                    .reference_id
                    .filter(|_| credit(e))
                    .and_then(|id| payments.get(&id))
                    .and_then(|p| entry_fiat(p, invoices.get(&p.invoice_id), &e.gate_id, e.amount.0));
                let [fiat_currency, rate, value] = fiat_cells(fiat);
                w.write_record([
                    e.id.to_string(),
                    ts(e.created_at),
                    e.gate_id.clone(),
                    e.bucket.as_str().to_owned(),
                    e.entry_type.as_str().to_owned(),
                    amount(Some(e.amount)),
                    amount(Some(e.balance_after)),
                    e.reference_type.clone().unwrap_or_default(),
                    e.reference_id.map(|r| r.to_string()).unwrap_or_default(),
                    text(e.description.as_deref()),
                    fiat_currency,
                    rate,
                    value,
                ])
                .map_err(csv_err)?;
            }
            (rows.last().map(|r| (r.created_at, r.id)), rows.len())
        }
        ExportKind::Payouts => {
            use payout::Column as C;
            let q = payout::Entity::find().filter(C::MerchantId.eq(merchant)).filter(C::Environment.eq(env));
            let rows = window(q, (C::CreatedAt, C::Id), range, after, limit).all(db).await?;
            for p in &rows {
                w.write_record([
                    p.id.to_string(),
                    ts(p.created_at),
                    p.status.as_str().to_owned(),
                    p.gate_id.clone(),
                    p.currency.clone(),
                    p.network.clone(),
                    amount(Some(p.amount)),
                    amount(Some(p.fee_amount)),
                    amount(Some(p.network_fee)),
                    amount(Some(p.merchant_debit_amount)),
                    amount(Some(p.recipient_amount)),
                    text(Some(&p.destination)),
                    text(p.destination_tag.as_deref()),
                    p.tx_hash.clone().unwrap_or_default(),
                    text(p.description.as_deref()),
                    text(p.failure_reason.as_deref()),
                    time(p.approved_at),
                    time(p.completed_at),
                    time(p.cancelled_at),
                    json(p.metadata.as_ref()),
                ])
                .map_err(csv_err)?;
            }
            (rows.last().map(|r| (r.created_at, r.id)), rows.len())
        }
    };
    Ok((finish(w)?, last, n as u64))
}

enum Step {
    Header,
    Page(Option<Cursor>),
    Done,
}

/// The CSV of `merchant`'s `kind` rows in `environment` created in `[from, to)`, oldest first:
/// the header row, then one chunk per page of `page_size` rows ([`PAGE_SIZE`] in the API). An
/// error ends the stream (the response is then cut short, never silently truncated: the client
/// sees an incomplete transfer). Check the range with [`parse_range`] first.
pub fn csv_stream(
    db: DatabaseConnection,
    merchant_id: MerchantId,
    environment: Environment,
    kind: ExportKind,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    page_size: u64,
) -> impl Stream<Item = DomainResult<Vec<u8>>> + Send + 'static {
    let merchant: Uuid = merchant_id.into();
    let page_size = page_size.max(1);
    futures::stream::try_unfold(Step::Header, move |step| {
        let db = db.clone();
        async move {
            match step {
                Step::Header => Ok(Some((header(kind)?, Step::Page(None)))),
                Step::Page(after) => {
                    let (chunk, last, n) =
                        page(&db, merchant, environment, kind, (from, to), after, page_size)
                            .await
                            .inspect_err(|e| tracing::error!(error = %e, export = kind.as_str(), "export cut short"))?;
                    if n == 0 {
                        return Ok(None);
                    }
                    let next = if n < page_size { Step::Done } else { Step::Page(last) };
                    Ok(Some((chunk, next)))
                }
                Step::Done => Ok(None),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_csv(bytes: &[u8]) -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(bytes)
            .records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect()
    }

    #[test]
    fn formula_cells_are_quoted_with_an_apostrophe() {
        for (given, shown) in [
            ("=SUM(A1:A9)", "'=SUM(A1:A9)"),
            ("+1", "'+1"),
            ("-2+3", "'-2+3"),
            ("@cmd", "'@cmd"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("order 42", "order 42"),
            ("a=b", "a=b"),
            ("", ""),
            ("'already", "'already"),
        ] {
            assert_eq!(guard(given), shown, "{given:?}");
        }
        assert_eq!(text(None), "");
        assert_eq!(json(Some(&serde_json::json!("=1+1"))), "\"=1+1\"");
        assert_eq!(json(Some(&serde_json::Value::String("x".into()))), "\"x\"");
    }

    #[test]
    fn cells_with_separators_quotes_and_newlines_come_back_whole() {
        let mut w = writer();
        let nasty = ["a,b", "say \"hi\"", "line1\nline2", "=cmd|' /C calc'!A0"];
        w.write_record(nasty.iter().map(|s| guard(s).into_owned())).unwrap();
        let bytes = finish(w).unwrap();
        assert!(bytes.ends_with(b"\r\n"));
        let rows = parse_csv(&bytes);
        assert_eq!(rows, vec![vec!["a,b", "say \"hi\"", "line1\nline2", "'=cmd|' /C calc'!A0"]]);
    }

    #[test]
    fn the_header_names_every_column_once() {
        for kind in ExportKind::ALL {
            let rows = parse_csv(&header(kind).unwrap());
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0], kind.columns());
            let mut seen = std::collections::HashSet::new();
            assert!(rows[0].iter().all(|c| seen.insert(c.clone())), "{kind:?}");
            assert_eq!(ExportKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ExportKind::parse("refunds"), None);
        assert_eq!(ExportKind::parse_field("Invoices").unwrap_err().details[0].split(':').next(), Some("kind"));
    }

    fn field_of(e: DomainError) -> Vec<String> {
        e.details.iter().map(|d| d.split(':').next().unwrap().to_owned()).collect()
    }

    #[test]
    fn ranges_take_dates_or_timestamps_and_refuse_the_rest_by_field() {
        let (f, t) = parse_range(Some("2026-01-01"), Some("2026-02-01")).unwrap();
        assert_eq!((ts(f).as_str(), ts(t).as_str()), ("2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"));
        let (f, t) = parse_range(Some("2026-01-01T10:00:00+02:00"), Some("2026-01-01T09:00:00.5Z")).unwrap();
        assert_eq!((ts(f).as_str(), ts(t).as_str()), ("2026-01-01T08:00:00.000Z", "2026-01-01T09:00:00.500Z"));

        assert_eq!(field_of(parse_range(None, Some("2026-01-01")).unwrap_err()), ["from"]);
        assert_eq!(field_of(parse_range(Some("2026-01-01"), None).unwrap_err()), ["to"]);
        assert_eq!(field_of(parse_range(None, None).unwrap_err()), ["from", "to"]);
        assert_eq!(field_of(parse_range(Some("yesterday"), Some("2026-01-01")).unwrap_err()), ["from"]);
        assert_eq!(field_of(parse_range(Some("2026-01-01"), Some("2026-13-01")).unwrap_err()), ["to"]);
        assert_eq!(field_of(parse_range(Some("2026-1-1"), Some("2026-02-01")).unwrap_err()), ["from"]);
        // Empty and reversed ranges: `to` is exclusive and must come after `from`.
        assert_eq!(field_of(parse_range(Some("2026-01-01"), Some("2026-01-01")).unwrap_err()), ["to"]);
        assert_eq!(field_of(parse_range(Some("2026-02-01"), Some("2026-01-01")).unwrap_err()), ["to"]);
        // At most 400 days.
        assert!(parse_range(Some("2025-01-01"), Some("2026-02-05")).is_ok());
        assert_eq!(field_of(parse_range(Some("2025-01-01"), Some("2026-02-06")).unwrap_err()), ["to"]);
    }

    #[test]
    fn file_names_use_dates_for_midnights_and_compact_times_otherwise() {
        let (f, t) = parse_range(Some("2026-01-01"), Some("2026-02-01")).unwrap();
        assert_eq!(ExportKind::LedgerEntries.file_name(f, t), "ledger_entries-2026-01-01-2026-02-01.csv");
        let (f, t) = parse_range(Some("2026-01-01"), Some("2026-01-01T12:30:00Z")).unwrap();
        assert_eq!(ExportKind::Payouts.file_name(f, t), "payouts-20260101T000000Z-20260101T123000Z.csv");
    }

    #[test]
    fn the_fiat_value_is_the_recorded_one_else_the_locked_rate_in_that_asset_only() {
        let now = Utc::now();
        let inv = invoice::Model {
            gate_id: Some("bitcoin".into()),
            fiat_currency: Some("EUR".into()),
            exchange_rate: Some(Amount::new("61234.5678".parse().unwrap())),
            ..invoice::Model::blank(Uuid::now_v7(), Uuid::now_v7(), Environment::Test, now)
        };
        let credited = |gate: &str, amount: &str| payment::Model {
            credited_at: Some(now),
            credited_gate_id: Some(gate.into()),
            credited_amount: Some(Amount::new(amount.parse().unwrap())),
            ..payment::Model::detected(inv.id, Environment::Test, "bitcoin".into(), "tx".into(), 0, Amount::ZERO, now)
        };
        // Credited before values were recorded: the invoice's locked rate.
        let f = fiat_at_credit(&credited("bitcoin", "0.0123"), Some(&inv)).unwrap();
        // 0.0123 × 61234.5678 = 753.18518394 → 753.19
        assert_eq!(
            (f.currency.as_str(), f.rate.0.to_string(), f.value.0.to_string()),
            ("EUR", "61234.5678".into(), "753.19".into())
        );
        // Another asset (a settlement conversion's target) is not priced by that rate.
        assert_eq!(fiat_at_credit(&credited("ethereum_usdt", "1"), Some(&inv)), None);
        // A crypto-priced invoice locked no rate.
        let crypto = invoice::Model { exchange_rate: None, fiat_currency: None, ..inv.clone() };
        assert_eq!(fiat_at_credit(&credited("bitcoin", "1"), Some(&crypto)), None);
        // What the credit recorded wins, whatever the invoice.
        let recorded = payment::Model {
            credited_fiat_currency: Some("USD".into()),
            credited_fiat_rate: Some(Amount::new("60000".parse().unwrap())),
            credited_fiat_value: Some(Amount::fiat("60".parse().unwrap())),
            ..credited("bitcoin", "0.001")
        };
        let f = fiat_at_credit(&recorded, Some(&crypto)).unwrap();
        assert_eq!((f.currency.as_str(), f.value.0.to_string()), ("USD", "60.00".into()));
        // Not credited: no value.
        assert_eq!(fiat_at_credit(&payment::Model { credited_at: None, ..recorded.clone() }, None), None);
        // A ledger entry of part of the credit (in the credited asset) at the credit's rate.
        let part = entry_fiat(&recorded, None, "bitcoin", "0.0005".parse().unwrap()).unwrap();
        assert_eq!(part.value.0.to_string(), "30.00");
        assert_eq!(entry_fiat(&recorded, None, "tron_usdt", "1".parse().unwrap()), None);
    }
}
