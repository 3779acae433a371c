//! Iteration order of LLVM's `StringMap` and `DenseMap<StringRef, _>`.
//!
//! LLVM's tools iterate hash tables when they write or list things: `clang-offload-bundler`
//! keeps bundle entries in a `StringMap` (so `-list` and `-unbundle` visit entries in hash
//! order, not file order) and matches requested targets through another one; the
//! OffloadBinary packager collects `--image` keys in a `DenseMap` and stores the string
//! records in its iteration order. Reproducing those outputs byte for byte needs the same
//! order, so these types replay the tables' exact algorithms — hash, bucket count, growth
//! rule, quadratic probing, tombstones — on the same sequence of operations, and iterate
//! buckets in index order like LLVM's iterators.
//!
//! Hashes: `StringMap` uses `xxh3_64bits` truncated to 32 bits (LLVM 19 and later);
//! `DenseMap<StringRef, _>` uses `hash_value(StringRef)`, LLVM's CityHash-derived
//! `hash_combine_range` with the fixed seed of release builds (`LLVM_ENABLE_ABI_BREAKING_CHECKS`
//! off, as in Debian's packages), truncated to 32 bits.

/// `xxh3_64bits(s)` truncated to `unsigned`, LLVM's string hash.
pub fn llvm_string_hash(s: &[u8]) -> u32 {
    twox_hash::XxHash3_64::oneshot(s) as u32
}

/// LLVM's `hash_value(StringRef)` (`llvm/ADT/Hashing.h`, release-build seed).
pub fn llvm_hash_value(s: &[u8]) -> u64 {
    city::hash_combine_range(s)
}

/// A port of the byte-range path of `llvm/ADT/Hashing.h`.
mod city {
    const SEED: u64 = 0xff51_afd7_ed55_8ccd;
    const K0: u64 = 0xc3a5_c85c_97cb_3127;
    const K1: u64 = 0xb492_b66f_be98_f273;
    const K2: u64 = 0x9ae1_6a3b_2f90_404f;
    const K3: u64 = 0xc949_d7c7_509e_6557;

    fn fetch64(s: &[u8], at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(b)
    }

    fn fetch32(s: &[u8], at: usize) -> u64 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&s[at..at + 4]);
        u64::from(u32::from_le_bytes(b))
    }

    fn rotate(v: u64, shift: u32) -> u64 {
        v.rotate_right(shift)
    }

    fn shift_mix(v: u64) -> u64 {
        v ^ (v >> 47)
    }

    fn hash_16_bytes(low: u64, high: u64) -> u64 {
        const MUL: u64 = 0x9ddf_ea08_eb38_2d69;
        let mut a = (low ^ high).wrapping_mul(MUL);
        a ^= a >> 47;
        let mut b = (high ^ a).wrapping_mul(MUL);
        b ^= b >> 47;
        b.wrapping_mul(MUL)
    }

    fn hash_1to3(s: &[u8], seed: u64) -> u64 {
        let len = s.len();
        let a = u32::from(s[0]);
        let b = u32::from(s[len >> 1]);
        let c = u32::from(s[len - 1]);
        let y = a.wrapping_add(b << 8);
        let z = (len as u32).wrapping_add(c << 2);
        shift_mix(u64::from(y).wrapping_mul(K2) ^ u64::from(z).wrapping_mul(K3) ^ seed)
            .wrapping_mul(K2)
    }

    fn hash_4to8(s: &[u8], seed: u64) -> u64 {
        let len = s.len();
        let a = fetch32(s, 0);
        hash_16_bytes(
            (len as u64).wrapping_add(a << 3),
            seed ^ fetch32(s, len - 4),
        )
    }

    fn hash_9to16(s: &[u8], seed: u64) -> u64 {
        let len = s.len();
        let a = fetch64(s, 0);
        let b = fetch64(s, len - 8);
        hash_16_bytes(seed ^ a, rotate(b.wrapping_add(len as u64), len as u32)) ^ b
    }

    fn hash_17to32(s: &[u8], seed: u64) -> u64 {
        let len = s.len();
        let a = fetch64(s, 0).wrapping_mul(K1);
        let b = fetch64(s, 8);
        let c = fetch64(s, len - 8).wrapping_mul(K2);
        let d = fetch64(s, len - 16).wrapping_mul(K0);
        hash_16_bytes(
            rotate(a.wrapping_sub(b), 43)
                .wrapping_add(rotate(c ^ seed, 30))
                .wrapping_add(d),
            a.wrapping_add(rotate(b ^ K3, 20))
                .wrapping_sub(c)
                .wrapping_add(len as u64)
                .wrapping_add(seed),
        )
    }

    fn hash_33to64(s: &[u8], seed: u64) -> u64 {
        let len = s.len();
        let mut z = fetch64(s, 24);
        let mut a = fetch64(s, 0).wrapping_add(
            (len as u64)
                .wrapping_add(fetch64(s, len - 16))
                .wrapping_mul(K0),
        );
        let mut b = rotate(a.wrapping_add(z), 52);
        let mut c = rotate(a, 37);
        a = a.wrapping_add(fetch64(s, 8));
        c = c.wrapping_add(rotate(a, 7));
        a = a.wrapping_add(fetch64(s, 16));
        let vf = a.wrapping_add(z);
        let vs = b.wrapping_add(rotate(a, 31)).wrapping_add(c);
        a = fetch64(s, 16).wrapping_add(fetch64(s, len - 32));
        z = fetch64(s, len - 8);
        b = rotate(a.wrapping_add(z), 52);
        c = rotate(a, 37);
        a = a.wrapping_add(fetch64(s, len - 24));
        c = c.wrapping_add(rotate(a, 7));
        a = a.wrapping_add(fetch64(s, len - 16));
        let wf = a.wrapping_add(z);
        let ws = b.wrapping_add(rotate(a, 31)).wrapping_add(c);
        let r = shift_mix(
            vf.wrapping_add(ws)
                .wrapping_mul(K2)
                .wrapping_add(wf.wrapping_add(vs).wrapping_mul(K0)),
        );
        shift_mix((seed ^ r.wrapping_mul(K0)).wrapping_add(vs)).wrapping_mul(K2)
    }

    fn hash_short(s: &[u8], seed: u64) -> u64 {
        match s.len() {
            0 => K2 ^ seed,
            1..=3 => hash_1to3(s, seed),
            4..=8 => hash_4to8(s, seed),
            9..=16 => hash_9to16(s, seed),
            17..=32 => hash_17to32(s, seed),
            _ => hash_33to64(s, seed),
        }
    }

    struct State {
        h: [u64; 7],
    }

    impl State {
        fn create(s: &[u8], seed: u64) -> State {
            let h4 = seed.wrapping_mul(K1);
            let h5 = shift_mix(seed);
            let mut st = State {
                h: [
                    0,
                    seed,
                    hash_16_bytes(seed, K1),
                    rotate(seed ^ K1, 49),
                    h4,
                    h5,
                    hash_16_bytes(h4, h5),
                ],
            };
            st.mix(s);
            st
        }

        fn mix_32(s: &[u8], a: &mut u64, b: &mut u64) {
            *a = a.wrapping_add(fetch64(s, 0));
            let c = fetch64(s, 24);
            *b = rotate(b.wrapping_add(*a).wrapping_add(c), 21);
            let d = *a;
            *a = a.wrapping_add(fetch64(s, 8).wrapping_add(fetch64(s, 16)));
            *b = b.wrapping_add(rotate(*a, 44)).wrapping_add(d);
            *a = a.wrapping_add(c);
        }

        fn mix(&mut self, s: &[u8]) {
            let h = &mut self.h;
            h[0] = rotate(
                h[0].wrapping_add(h[1])
                    .wrapping_add(h[3])
                    .wrapping_add(fetch64(s, 8)),
                37,
            )
            .wrapping_mul(K1);
            h[1] =
                rotate(h[1].wrapping_add(h[4]).wrapping_add(fetch64(s, 48)), 42).wrapping_mul(K1);
            h[0] ^= h[6];
            h[1] = h[1].wrapping_add(h[3]).wrapping_add(fetch64(s, 40));
            h[2] = rotate(h[2].wrapping_add(h[5]), 33).wrapping_mul(K1);
            h[3] = h[4].wrapping_mul(K1);
            h[4] = h[0].wrapping_add(h[5]);
            let (mut a, mut b) = (h[3], h[4]);
            Self::mix_32(s, &mut a, &mut b);
            h[3] = a;
            h[4] = b;
            h[5] = h[2].wrapping_add(h[6]);
            h[6] = h[1].wrapping_add(fetch64(s, 16));
            let (mut a, mut b) = (h[5], h[6]);
            Self::mix_32(&s[32..], &mut a, &mut b);
            h[5] = a;
            h[6] = b;
            h.swap(2, 0);
        }

        fn finalize(&self, len: u64) -> u64 {
            let h = &self.h;
            hash_16_bytes(
                hash_16_bytes(h[3], h[5])
                    .wrapping_add(shift_mix(h[1]).wrapping_mul(K1))
                    .wrapping_add(h[2]),
                hash_16_bytes(h[4], h[6])
                    .wrapping_add(shift_mix(len).wrapping_mul(K1))
                    .wrapping_add(h[0]),
            )
        }
    }

    pub fn hash_combine_range(s: &[u8]) -> u64 {
        let len = s.len();
        if len <= 64 {
            return hash_short(s, SEED);
        }
        let aligned_end = len & !63;
        let mut st = State::create(&s[..64], SEED);
        let mut at = 64;
        while at != aligned_end {
            st.mix(&s[at..at + 64]);
            at += 64;
        }
        if len & 63 != 0 {
            st.mix(&s[len - 64..]);
        }
        st.finalize(len as u64)
    }
}

#[derive(Clone, Debug)]
enum Slot<V> {
    Empty,
    Tombstone,
    Full(Vec<u8>, V),
}

impl<V> Slot<V> {
    fn is_empty(&self) -> bool {
        matches!(self, Slot::Empty)
    }
}

/// A `llvm::StringMap<V>` replica (`llvm/lib/Support/StringMap.cpp`).
#[derive(Clone, Debug)]
pub struct StringMap<V> {
    table: Vec<Slot<V>>,
    hashes: Vec<u32>,
    items: usize,
    tombstones: usize,
}

impl<V> Default for StringMap<V> {
    fn default() -> Self {
        StringMap {
            table: Vec::new(),
            hashes: Vec::new(),
            items: 0,
            tombstones: 0,
        }
    }
}

impl<V> StringMap<V> {
    /// An empty map (no buckets until the first insertion, like LLVM's).
    pub fn new() -> Self {
        Self::default()
    }

    fn init(&mut self, buckets: usize) {
        self.table = (0..buckets).map(|_| Slot::Empty).collect();
        self.hashes = vec![0; buckets];
        self.items = 0;
        self.tombstones = 0;
    }

    /// `LookupBucketFor`: the bucket holding `key`, or the one it would be inserted in.
    fn lookup_bucket_for(&mut self, key: &[u8]) -> usize {
        if self.table.is_empty() {
            self.init(16);
        }
        let n = self.table.len();
        let full = llvm_string_hash(key);
        let mut bucket = full as usize & (n - 1);
        let mut probe = 1usize;
        let mut first_tombstone: Option<usize> = None;
        loop {
            match &self.table[bucket] {
                Slot::Empty => {
                    let at = first_tombstone.unwrap_or(bucket);
                    self.hashes[at] = full;
                    return at;
                }
                Slot::Tombstone => {
                    if first_tombstone.is_none() {
                        first_tombstone = Some(bucket);
                    }
                }
                Slot::Full(k, _) => {
                    if self.hashes[bucket] == full && k.as_slice() == key {
                        return bucket;
                    }
                }
            }
            bucket = (bucket + probe) & (n - 1);
            probe += 1;
        }
    }

    /// `FindKey`: the bucket holding `key`.
    fn find(&self, key: &[u8]) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let n = self.table.len();
        let full = llvm_string_hash(key);
        let mut bucket = full as usize & (n - 1);
        let mut probe = 1usize;
        loop {
            match &self.table[bucket] {
                Slot::Empty => return None,
                Slot::Tombstone => {}
                Slot::Full(k, _) => {
                    if self.hashes[bucket] == full && k.as_slice() == key {
                        return Some(bucket);
                    }
                }
            }
            bucket = (bucket + probe) & (n - 1);
            probe += 1;
        }
    }

    /// `RehashTable`: grows (or cleans) the table after an insertion.
    fn rehash(&mut self) {
        let n = self.table.len();
        let new_size = if self.items * 4 > n * 3 {
            n * 2
        } else if n - (self.items + self.tombstones) <= n / 8 {
            n
        } else {
            return;
        };
        let old_table = std::mem::take(&mut self.table);
        let old_hashes = std::mem::take(&mut self.hashes);
        self.table = (0..new_size).map(|_| Slot::Empty).collect();
        self.hashes = vec![0; new_size];
        for (slot, full) in old_table.into_iter().zip(old_hashes) {
            if let Slot::Full(..) = slot {
                let mut bucket = full as usize & (new_size - 1);
                let mut probe = 1usize;
                while !self.table[bucket].is_empty() {
                    bucket = (bucket + probe) & (new_size - 1);
                    probe += 1;
                }
                self.table[bucket] = slot;
                self.hashes[bucket] = full;
            }
        }
        self.tombstones = 0;
    }

    /// `try_emplace` / `operator[]`: inserts `key` with `value` unless present; returns
    /// whether it was inserted.
    pub fn insert_if_absent(&mut self, key: &[u8], value: V) -> bool {
        let bucket = self.lookup_bucket_for(key);
        match &self.table[bucket] {
            Slot::Full(..) => false,
            Slot::Tombstone | Slot::Empty => {
                if matches!(self.table[bucket], Slot::Tombstone) {
                    self.tombstones -= 1;
                }
                self.table[bucket] = Slot::Full(key.to_vec(), value);
                self.items += 1;
                self.rehash();
                true
            }
        }
    }

    /// `map[key] = value`: inserts or overwrites (an overwritten key keeps its bucket).
    pub fn set(&mut self, key: &[u8], value: V) {
        let bucket = self.lookup_bucket_for(key);
        match &mut self.table[bucket] {
            Slot::Full(_, v) => *v = value,
            _ => {
                self.insert_if_absent(key, value);
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        match self.find(key).map(|b| &self.table[b]) {
            Some(Slot::Full(_, v)) => Some(v),
            _ => None,
        }
    }

    /// `erase(key)`: leaves a tombstone.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let bucket = self.find(key)?;
        let old = std::mem::replace(&mut self.table[bucket], Slot::Tombstone);
        self.items -= 1;
        self.tombstones += 1;
        match old {
            Slot::Full(_, v) => Some(v),
            _ => None,
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.items
    }

    /// True if there are no keys.
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// The entries in LLVM's iteration order (bucket order).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.table.iter().filter_map(|s| match s {
            Slot::Full(k, v) => Some((k.as_slice(), v)),
            _ => None,
        })
    }
}

/// LLVM's `NextPowerOf2`: the smallest power of two strictly greater than `a` (0 on overflow).
fn next_power_of_2(mut a: u64) -> u64 {
    a |= a >> 1;
    a |= a >> 2;
    a |= a >> 4;
    a |= a >> 8;
    a |= a >> 16;
    a |= a >> 32;
    a.wrapping_add(1)
}

/// A `llvm::DenseMap<StringRef, V>` replica (`llvm/include/llvm/ADT/DenseMap.h`).
#[derive(Clone, Debug)]
pub struct DenseStringMap<V> {
    table: Vec<Slot<V>>,
    entries: usize,
    tombstones: usize,
}

impl<V> Default for DenseStringMap<V> {
    fn default() -> Self {
        DenseStringMap {
            table: Vec::new(),
            entries: 0,
            tombstones: 0,
        }
    }
}

impl<V> DenseStringMap<V> {
    /// An empty map (no buckets until the first insertion).
    pub fn new() -> Self {
        Self::default()
    }

    /// `LookupBucketFor`: `Ok(bucket)` if `key` is present, else `Err(bucket to insert at)`.
    fn lookup(&self, key: &[u8]) -> Result<usize, Option<usize>> {
        let n = self.table.len();
        if n == 0 {
            return Err(None);
        }
        let mut bucket = llvm_hash_value(key) as u32 as usize & (n - 1);
        let mut probe = 1usize;
        let mut tombstone = None;
        loop {
            match &self.table[bucket] {
                Slot::Full(k, _) if k.as_slice() == key => return Ok(bucket),
                Slot::Full(..) => {}
                Slot::Empty => return Err(Some(tombstone.unwrap_or(bucket))),
                Slot::Tombstone => {
                    if tombstone.is_none() {
                        tombstone = Some(bucket);
                    }
                }
            }
            bucket = (bucket + probe) & (n - 1);
            probe += 1;
        }
    }

    /// `grow(at_least)`: reallocates to `max(64, NextPowerOf2(at_least - 1))` buckets and
    /// reinserts the old entries in bucket order.
    fn grow(&mut self, at_least: usize) {
        // `std::max<unsigned>(64, NextPowerOf2(AtLeast - 1))` with `AtLeast` unsigned.
        let want = u64::from((at_least as u32).wrapping_sub(1));
        let next_pow2 = next_power_of_2(want) as u32;
        let buckets = (next_pow2 as usize).max(64);
        let old = std::mem::take(&mut self.table);
        self.table = (0..buckets).map(|_| Slot::Empty).collect();
        self.tombstones = 0;
        for slot in old {
            if let Slot::Full(k, v) = slot {
                if let Err(Some(at)) = self.lookup(&k) {
                    self.table[at] = Slot::Full(k, v);
                }
            }
        }
    }

    /// `try_emplace`: inserts `key` with `value` unless present; returns whether it was
    /// inserted.
    pub fn insert_if_absent(&mut self, key: &[u8], value: V) -> bool {
        let at = match self.lookup(key) {
            Ok(_) => return false,
            Err(at) => at,
        };
        let n = self.table.len();
        let new_entries = self.entries + 1;
        let at = if new_entries * 4 >= n * 3 {
            self.grow(n * 2);
            self.lookup(key).err().flatten()
        } else if n - (new_entries + self.tombstones) <= n / 8 {
            self.grow(n);
            self.lookup(key).err().flatten()
        } else {
            at
        };
        let Some(at) = at else { return false };
        self.entries += 1;
        if matches!(self.table[at], Slot::Tombstone) {
            self.tombstones -= 1;
        }
        self.table[at] = Slot::Full(key.to_vec(), value);
        true
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        match self.lookup(key) {
            Ok(b) => match &self.table[b] {
                Slot::Full(_, v) => Some(v),
                _ => None,
            },
            Err(_) => None,
        }
    }

    /// Mutable value of `key`.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        match self.lookup(key) {
            Ok(b) => match &mut self.table[b] {
                Slot::Full(_, v) => Some(v),
                _ => None,
            },
            Err(_) => None,
        }
    }

    /// The entries in LLVM's iteration order (bucket order).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.table.iter().filter_map(|s| match s {
            Slot::Full(k, v) => Some((k.as_slice(), v)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh3_is_llvms_hash() {
        // xxh3_64bits("") is the XXH3 reference value for empty input.
        assert_eq!(twox_hash::XxHash3_64::oneshot(b""), 0x2D06800538D394C2);
    }

    #[test]
    fn string_map_keeps_overwritten_position_and_reuses_tombstones() {
        let mut m = StringMap::new();
        for (i, k) in ["a", "b", "c", "d"].iter().enumerate() {
            m.set(k.as_bytes(), i);
        }
        let order: Vec<_> = m.iter().map(|(k, _)| k.to_vec()).collect();
        m.set(b"b", 10);
        let again: Vec<_> = m.iter().map(|(k, _)| k.to_vec()).collect();
        assert_eq!(order, again);
        assert_eq!(m.get(b"b"), Some(&10));
        assert_eq!(m.remove(b"a"), Some(0));
        assert_eq!(m.len(), 3);
        assert!(m.get(b"a").is_none());
        // Growth past 3/4 of 16 buckets keeps every key.
        for i in 0..40 {
            m.set(format!("k{i}").as_bytes(), i);
        }
        assert_eq!(m.len(), 43);
        assert_eq!(m.iter().count(), 43);
    }
}
