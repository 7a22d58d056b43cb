//! The events API (`GET /v1/events`): each event names the invoice and the payout it is about in
//! indexed columns (filled at emit time; existing rows filled here from their payload), and the
//! new `events:read` permission is granted to every existing key that can read invoices (an
//! event carries nothing more than the invoice and payout it names).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::prelude::{Json, Uuid};
use sea_orm_migration::sea_orm::{ConnectionTrait, FromQueryResult};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000016_event_refs"
    }
}

#[derive(DeriveIden)]
enum Events {
    Table,
    Id,
    Payload,
    InvoiceId,
    PayoutId,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    Permissions,
}

#[derive(FromQueryResult)]
struct Row {
    id: Uuid,
    payload: Json,
}

#[derive(FromQueryResult)]
struct Key {
    id: Uuid,
    permissions: Json,
}

fn uuid_at(payload: &Json, field: &str) -> Option<Uuid> {
    payload.get(field)?.as_str()?.parse().ok()
}

const BATCH: u64 = 1000;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        for col in [Events::InvoiceId, Events::PayoutId] {
            manager
                .alter_table(
                    Table::alter().table(Events::Table).add_column(ColumnDef::new(col).uuid().null()).to_owned(),
                )
                .await?;
        }
        for (name, col) in [("idx_events_invoice", Events::InvoiceId), ("idx_events_payout", Events::PayoutId)] {
            manager.create_index(Index::create().name(name).table(Events::Table).col(col).to_owned()).await?;
        }

        // Existing events: their invoice and payout from the payload, in batches by id.
        let db = manager.get_connection();
        let backend = manager.get_database_backend();
        let mut after: Option<Uuid> = None;
        loop {
            let mut q = Query::select();
            q.columns([Events::Id, Events::Payload]).from(Events::Table).order_by(Events::Id, Order::Asc).limit(BATCH);
            if let Some(a) = after {
                q.and_where(Expr::col(Events::Id).gt(a));
            }
            let rows = Row::find_by_statement(backend.build(&q)).all(db).await?;
            let Some(last) = rows.last() else { break };
            after = Some(last.id);
            for r in &rows {
                let (invoice, payout) = (uuid_at(&r.payload, "invoice_id"), uuid_at(&r.payload, "payout_id"));
                if invoice.is_none() && payout.is_none() {
                    continue;
                }
                let update = Query::update()
                    .table(Events::Table)
                    .value(Events::InvoiceId, invoice)
                    .value(Events::PayoutId, payout)
                    .and_where(Expr::col(Events::Id).eq(r.id))
                    .to_owned();
                db.execute(&update).await?;
            }
            if (rows.len() as u64) < BATCH {
                break;
            }
        }

        // `events:read` for every key that reads invoices.
        let keys = Key::find_by_statement(
            backend.build(Query::select().columns([ApiKeys::Id, ApiKeys::Permissions]).from(ApiKeys::Table)),
        )
        .all(db)
        .await?;
        for k in keys {
            let Some(list) = k.permissions.as_array() else { continue };
            let has = |p: &str| list.iter().any(|v| v.as_str() == Some(p));
            if !has("invoices:read") || has("events:read") {
                continue;
            }
            let mut list = list.clone();
            list.push(Json::from("events:read"));
            let update = Query::update()
                .table(ApiKeys::Table)
                .value(ApiKeys::Permissions, Json::Array(list))
                .and_where(Expr::col(ApiKeys::Id).eq(k.id))
                .to_owned();
            db.execute(&update).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for name in ["idx_events_invoice", "idx_events_payout"] {
            manager.drop_index(Index::drop().name(name).table(Events::Table).to_owned()).await?;
        }
        for col in [Events::InvoiceId, Events::PayoutId] {
            manager.alter_table(Table::alter().table(Events::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
