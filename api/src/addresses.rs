//! Deposit address allocation.
//!
//! Every invoice gets a fresh derivation index per (environment, address family). Indices come
//! from the `derivation_counters` row, reserved in blocks of `invoices.address_block_size` so
//! the hot path costs no extra database statement and processes never contend on the counter;
//! an index is never handed out twice (the reservation is one atomic `UPDATE … RETURNING`),
//! and the unique `(environment, address_key)` index backs that up.

use std::collections::HashMap;

use entity::{Environment, derivation_counter};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait};

use crate::chain::address::{AccountKeysConfig, AddressDeriver, AddressFamily, ChainNet};
use crate::config::{Config, ConfigError};
use crate::error::ApiError;

#[derive(Debug, Clone)]
pub struct Allocated {
    pub address: String,
    pub tag: Option<String>,
    pub index: i64,
    pub key: String,
}

/// The scanner's lookup key for an address: `<family>:<address>:<tag>`.
pub fn address_key(family: AddressFamily, address: &str, tag: Option<&str>) -> String {
    // EVM addresses are case-insensitive (EIP-55 is only a checksum).
    let addr = match family {
        AddressFamily::Evm => address.to_ascii_lowercase(),
        _ => address.to_owned(),
    };
    format!("{}:{}:{}", family.as_str(), addr, tag.unwrap_or(""))
}

pub struct AddressBook {
    test: AddressDeriver,
    live: AddressDeriver,
    block_size: i64,
    blocks: tokio::sync::Mutex<HashMap<(Environment, AddressFamily), (i64, i64)>>,
}

impl AddressBook {
    pub fn new(cfg: &Config) -> Result<AddressBook, ConfigError> {
        let invalid = |e: crate::chain::address::AddressConfigError| ConfigError::Invalid {
            key: e.key().to_owned(),
            message: e.to_string(),
        };
        let live =
            AddressDeriver::from_config(&cfg.addresses.live, ChainNet::Mainnet, "addresses.live").map_err(invalid)?;
        let test = match &cfg.addresses.test {
            Some(keys) => AddressDeriver::from_config(keys, ChainNet::Testnet, "addresses.test").map_err(invalid)?,
            None => AddressDeriver::builtin_test(),
        };
        Ok(AddressBook {
            test,
            live,
            block_size: i64::from(cfg.invoices.address_block_size),
            blocks: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    /// Build with explicit keys (tests, tools).
    pub fn with_keys(live: &AccountKeysConfig, block_size: u32) -> Result<AddressBook, ConfigError> {
        let cfg = Config {
            addresses: crate::config::AddressesConfig { live: live.clone(), test: None },
            invoices: crate::config::InvoicesConfig { address_block_size: block_size, ..Default::default() },
            ..Config::default()
        };
        Self::new(&cfg)
    }

    fn deriver(&self, env: Environment) -> &AddressDeriver {
        match env {
            Environment::Test => &self.test,
            Environment::Live => &self.live,
        }
    }

    pub fn supports(&self, env: Environment, family: AddressFamily) -> bool {
        self.deriver(env).supports(family)
    }

    /// The next unused address of `family` in `env`.
    pub async fn allocate(
        &self,
        db: &DatabaseConnection,
        env: Environment,
        family: AddressFamily,
    ) -> Result<Allocated, ApiError> {
        let index = {
            let mut blocks = self.blocks.lock().await;
            let slot = blocks.entry((env, family)).or_insert((0, 0));
            if slot.0 >= slot.1 {
                let end = reserve(db, env, family, self.block_size).await?;
                *slot = (end - self.block_size, end);
            }
            let i = slot.0;
            slot.0 += 1;
            i
        };
        let idx = u64::try_from(index).map_err(ApiError::internal)?;
        let derived = self.deriver(env).derive(family, idx).map_err(ApiError::internal)?;
        let key = address_key(family, &derived.address, derived.tag.as_deref());
        Ok(Allocated { address: derived.address, tag: derived.tag, index, key })
    }
}

/// Atomically moves the counter forward by `n`; returns the new end (exclusive).
async fn reserve(db: &DatabaseConnection, env: Environment, family: AddressFamily, n: i64) -> Result<i64, ApiError> {
    use derivation_counter::Column as C;
    derivation_counter::Entity::insert(derivation_counter::ActiveModel {
        environment: Set(env.as_str().to_owned()),
        family: Set(family.as_str().to_owned()),
        next_index: Set(0),
    })
    .on_conflict(OnConflict::columns([C::Environment, C::Family]).do_nothing().to_owned())
    .exec_without_returning(db)
    .await?;
    let stmt = Query::update()
        .table(derivation_counter::Entity)
        .value(C::NextIndex, Expr::col(C::NextIndex).add(n))
        .and_where(C::Environment.eq(env.as_str()))
        .and_where(C::Family.eq(family.as_str()))
        .returning_col(C::NextIndex)
        .to_owned();
    let row = db.query_one(&stmt).await?.ok_or_else(|| ApiError::internal("derivation counter row missing"))?;
    Ok(row.try_get_by_index::<i64>(0)?)
}
