//! A bounded in-process cache whose entries expire after a fixed time. It backs the API key
//! and merchant-settings caches, so a change made elsewhere (a revoked key, new settings) is
//! seen by every API process within the TTL.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// Entries kept at most; when full, expired entries go first, then everything.
const MAX_ENTRIES: usize = 100_000;

pub struct TtlCache<K, V> {
    ttl: Duration,
    map: RwLock<HashMap<K, (V, Instant)>>,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    pub fn new(ttl: Duration) -> Self {
        TtlCache { ttl, map: RwLock::new(HashMap::new()) }
    }

    /// The value if it was stored less than the TTL ago.
    pub fn get(&self, k: &K) -> Option<V> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.get(k).filter(|(_, at)| at.elapsed() < self.ttl).map(|(v, _)| v.clone())
    }

    /// Drops `k`: the next `get` misses and the caller reads the source again.
    pub fn forget(&self, k: &K) {
        self.map.write().unwrap_or_else(|p| p.into_inner()).remove(k);
    }

    pub fn put(&self, k: K, v: V) {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            map.retain(|_, (_, at)| at.elapsed() < ttl);
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
        }
        map.insert(k, (v, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_the_ttl() {
        let c = TtlCache::new(Duration::from_millis(30));
        c.put("k", 1);
        assert_eq!(c.get(&"k"), Some(1));
        assert_eq!(c.get(&"other"), None);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(c.get(&"k"), None);
    }
}
