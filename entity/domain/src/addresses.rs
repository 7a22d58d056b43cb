//! Deposit address allocation.
//!
//! Every invoice gets a fresh derivation index per (environment, address family). Indices come
//! from the `derivation_counters` row, reserved in blocks of `invoices.address_block_size` so
//! the hot path costs no extra database statement and processes never contend on the counter;
//! an index is never handed out twice (the reservation is one atomic `UPDATE … RETURNING`),
//! and the unique `(environment, address_key)` index backs that up. The next block is fetched
//! in the background once the current one is half used, so no request waits on the counter
//! while holding the allocator lock.
//! When a burst drains both blocks, one request reserves while the others wait for it (no
//! stampede on the counter row). A restart leaves at most two blocks unused: unpaid invoices
//! leave gaps anyway, so the service, not a wallet's gap limit, is what watches derived
//! addresses. Live Solana pool addresses are finite and reserved one at a time; an exhausted
//! pool is 503 `gate_offline`. Checkout activation does not draw on the blocks: it reserves its
//! one index inside its own transaction, after its guarded update ([`AddressBook::allocate_in`]),
//! so a rollback takes no address.
//!
//! [`address_key`] (`family:address:tag`) is also the deposit scanner's constant-cost lookup
//! key. Static addresses draw from the same counters, so a static address never equals an
//! invoice's address; their table has its own unique `(environment, address_key)` index.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use entity::{Environment, derivation_counter};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait};

use crate::chain::address::{AccountKeysConfig, AddressDeriver, AddressFamily, ChainNet, DeriveError};
use crate::config::{Config, ConfigError};
use crate::domain_error::{DomainError, ErrorCode};

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
    blocks: Arc<Mutex<HashMap<(Environment, AddressFamily), Blocks>>>,
}

/// Reserved, unused indices of one (environment, family): `current` is being handed out,
/// `next` is ready for when it runs out. `refill` admits one reservation at a time, so a burst
/// that drains the blocks waits for one counter update instead of stampeding the counter row.
#[derive(Default)]
struct Blocks {
    current: std::ops::Range<i64>,
    next: Option<std::ops::Range<i64>>,
    prefetching: bool,
    refill: Arc<tokio::sync::Mutex<()>>,
}

impl Blocks {
    fn install(&mut self, fresh: std::ops::Range<i64>) {
        if self.current.is_empty() {
            self.current = fresh;
        } else if self.next.is_none() {
            self.next = Some(fresh);
        }
        // else: both full already; these indices stay unused (a harmless gap).
    }
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
            blocks: Arc::new(Mutex::new(HashMap::new())),
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
    ) -> Result<Allocated, DomainError> {
        let block = self.block_size(env, family);
        let index = loop {
            let taken = {
                let mut map = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
                let b = map.entry((env, family)).or_default();
                if b.current.is_empty()
                    && let Some(next) = b.next.take()
                {
                    b.current = next;
                }
                match b.current.next() {
                    Some(i) => {
                        let low = (b.current.end - b.current.start) <= block / 2;
                        let start_prefetch = low && b.next.is_none() && !b.prefetching;
                        b.prefetching |= start_prefetch;
                        Ok((i, start_prefetch))
                    }
                    None => Err(b.refill.clone()),
                }
            };
            match taken {
                Ok((i, start_prefetch)) => {
                    if start_prefetch {
                        self.spawn_prefetch(db.clone(), env, family, block);
                    }
                    break i;
                }
                // Nothing reserved (first use, or the prefetch is late): one request reserves,
                // the others wait for it and then take from the new block.
                Err(refill) => {
                    let _turn = refill.lock().await;
                    let still_empty = {
                        let map = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
                        map.get(&(env, family)).is_none_or(|b| b.current.is_empty() && b.next.is_none())
                    };
                    if still_empty {
                        let end = reserve(db, env, family, block).await?;
                        let mut map = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
                        map.entry((env, family)).or_default().install((end - block)..end);
                    }
                }
            }
        };
        self.derive(env, family, index)
    }

    /// The next unused address of `family` in `env`, taken in the caller's transaction `txn`:
    /// one index reserved from the counter by `txn` itself, so it is taken only if `txn`
    /// commits (a rollback, or a derivation error, takes none) and nothing is held in memory.
    /// For allocations that must follow a guarded update (checkout activation), where the
    /// address is wanted only once the caller knows it won: a finite pool (live Solana) loses
    /// no entry to a request that lost. Costs one counter update, which stays locked until
    /// `txn` ends.
    pub async fn allocate_in<C: ConnectionTrait>(
        &self,
        txn: &C,
        env: Environment,
        family: AddressFamily,
    ) -> Result<Allocated, DomainError> {
        let end = reserve(txn, env, family, 1).await?;
        self.derive(env, family, end - 1)
    }

    /// Address number `index` of `family` in `env`.
    fn derive(&self, env: Environment, family: AddressFamily, index: i64) -> Result<Allocated, DomainError> {
        let idx = u64::try_from(index).map_err(DomainError::internal)?;
        let derived = self.deriver(env).derive(family, idx).map_err(|e| match e {
            // Operational states, not bugs: the gate cannot issue addresses right now.
            DeriveError::PoolExhausted { .. } | DeriveError::NotConfigured { .. } | DeriveError::IndexOutOfRange { .. } => {
                tracing::error!(environment = %env, family = family.as_str(), error = %e, "cannot issue deposit addresses");
                DomainError::unavailable(ErrorCode::GateOffline, format!("no deposit address available: {e}"))
            }
            DeriveError::Derivation { .. } => DomainError::internal(e),
        })?;
        let key = address_key(family, &derived.address, derived.tag.as_deref());
        Ok(Allocated { address: derived.address, tag: derived.tag, index, key })
    }

    /// Indices reserved at a time. Operator-provisioned pools (live Solana) are finite, so they
    /// are reserved one at a time and a restart wastes none.
    fn block_size(&self, env: Environment, family: AddressFamily) -> i64 {
        match (env, family) {
            (Environment::Live, AddressFamily::Solana) => 1,
            _ => self.block_size,
        }
    }

    fn spawn_prefetch(&self, db: DatabaseConnection, env: Environment, family: AddressFamily, n: i64) {
        let blocks = self.blocks.clone();
        tokio::spawn(async move {
            let refill = {
                let mut map = blocks.lock().unwrap_or_else(|p| p.into_inner());
                map.entry((env, family)).or_default().refill.clone()
            };
            let _turn = refill.lock().await;
            let reserved = reserve(&db, env, family, n).await;
            let mut map = blocks.lock().unwrap_or_else(|p| p.into_inner());
            let b = map.entry((env, family)).or_default();
            b.prefetching = false;
            match reserved {
                Ok(end) => b.install((end - n)..end),
                Err(e) => {
                    tracing::warn!(error = %e.message, "prefetching deposit address indices failed; will reserve inline")
                }
            }
        });
    }
}

/// Atomically moves the counter forward by `n`; returns the new end (exclusive).
async fn reserve<C: ConnectionTrait>(
    db: &C,
    env: Environment,
    family: AddressFamily,
    n: i64,
) -> Result<i64, DomainError> {
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
    let row = db.query_one(&stmt).await?.ok_or_else(|| DomainError::internal("derivation counter row missing"))?;
    Ok(row.try_get_by_index::<i64>(0)?)
}
