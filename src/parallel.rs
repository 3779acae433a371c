//! Work on the units of a file on several threads, the results in the units' order
//! (feature `parallel`): the one parallel driver `loader-sim` (`select`, `list`, `validate`,
//! `doctor --deep`) and the C API's reader share (issue 47).
//!
//! Each worker takes the next item, does all of its work (for a compressed bundle: decode
//! its stream and hash it as the bytes come, through one window), hands back a result and
//! takes the next item. So memory grows by at most one item's working set per worker, and
//! the results, put back in the items' order, are exactly those of the serial loop:
//! `jobs` = 1 *is* the serial loop, on the calling thread.

use alloc::vec::Vec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f(index, item)` for every item of `items`, on at most `jobs` threads, the results in
/// the items' order. With `jobs` ≤ 1, or one item, the items are done in order on the
/// calling thread (no thread is started). Every item is done exactly once; a panic in `f`
/// is resumed on the calling thread once the other workers have stopped.
///
/// ```
/// use offload_image::parallel::map_ordered;
///
/// let squares = map_ordered(&[1u64, 2, 3, 4, 5], 3, |i, x| (i, x * x));
/// assert_eq!(squares, [(0, 1), (1, 4), (2, 9), (3, 16), (4, 25)]);
/// ```
pub fn map_ordered<T, R, F>(items: &[T], jobs: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(usize, &T) -> R + Sync,
{
    let workers = jobs.min(items.len());
    if workers <= 1 {
        return items.iter().enumerate().map(|(i, t)| f(i, t)).collect();
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    let mut panicked = None;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(i, item);
                    done.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
                })
            })
            .collect();
        for h in handles {
            if let Err(p) = h.join() {
                // Stop handing out items; the others finish the one they hold.
                next.store(items.len(), Ordering::Relaxed);
                panicked.get_or_insert(p);
            }
        }
    });
    if let Some(p) = panicked {
        std::panic::resume_unwind(p);
    }
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item once, in order, whatever the number of workers; one item or one job
    /// runs on the calling thread.
    #[test]
    fn results_come_back_in_the_items_order() {
        let items: Vec<u32> = (0..1000).collect();
        let serial = map_ordered(&items, 1, |i, x| (i, x.wrapping_mul(3)));
        for jobs in [2, 4, 7, 64] {
            assert_eq!(
                map_ordered(&items, jobs, |i, x| (i, x.wrapping_mul(3))),
                serial
            );
        }
        let caller = std::thread::current().id();
        let ids = map_ordered(&items[..1], 8, |_, _| std::thread::current().id());
        assert_eq!(ids, [caller]);
        let ids = map_ordered(&items[..5], 1, |_, _| std::thread::current().id());
        assert!(ids.iter().all(|t| *t == caller));
    }
}
