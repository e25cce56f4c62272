//! Benchmark rows run side by side: a few worker threads take tasks in a given order, report
//! progress through a channel, and the results come back in task order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;

use crate::error::{BenchError, Result};

/// Progress a task reports: a label and an amount of work done since its last report.
pub(crate) type Report = (String, u64);

/// Threads to run `tasks` tasks on: `threads`, or one per core if 0, and no more than tasks.
pub(crate) fn threads_for(threads: usize, tasks: usize) -> usize {
    match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(tasks.max(1))
}

/// Runs task `i` for each `i` of `order` as `work(i, reports)` on `threads` threads, and
/// calls `progress(label, done, total)` as the reports come in (their amounts add up to
/// `total`). The results are in task-number order; the first error wins, and a worker that
/// panicked is an error too.
pub(crate) fn run<R: Send>(
    order: &[usize],
    threads: usize,
    total: u64,
    work: &(dyn Fn(usize, &Sender<Report>) -> Result<R> + Sync),
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<R>> {
    let tasks = order.iter().max().map_or(0, |&m| m + 1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<R>>>> = Mutex::new((0..tasks).map(|_| None).collect());
    let (tx, rx) = mpsc::channel::<Report>();
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for _ in 0..threads_for(threads, order.len()) {
            let tx = tx.clone();
            let (next, results) = (&next, &results);
            handles.push(scope.spawn(move || {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let r = work(i, &tx);
                    if let Ok(mut slots) = results.lock() {
                        slots[i] = Some(r);
                    }
                }
            }));
        }
        drop(tx);
        let mut done = 0u64;
        for (label, amount) in rx {
            done = (done + amount).min(total);
            progress(&label, done, total);
        }
        for h in handles {
            if h.join().is_err() {
                if let Ok(mut slots) = results.lock() {
                    for s in slots.iter_mut().filter(|s| s.is_none()) {
                        *s = Some(Err(BenchError::Worker("a worker thread panicked".into())));
                    }
                }
            }
        }
    });
    let slots = results
        .into_inner()
        .map_err(|_| BenchError::Worker("a worker thread panicked".into()))?;
    slots
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Err(BenchError::Worker("a row was never run".into()))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_task_order_with_all_progress() {
        let order = [3, 1, 0, 2];
        let mut seen = 0;
        let r = run(
            &order,
            2,
            40,
            &|i, tx| {
                tx.send((format!("task {i}"), 10)).unwrap();
                Ok(i * 2)
            },
            &mut |_, done, total| {
                assert_eq!(total, 40);
                seen = done;
            },
        )
        .unwrap();
        assert_eq!(r, vec![0, 2, 4, 6]);
        assert_eq!(seen, 40);
    }

    #[test]
    fn the_first_error_wins() {
        let r = run(
            &[0, 1],
            1,
            0,
            &|i, _| {
                if i == 1 {
                    Err(BenchError::Worker("task 1 failed".into()))
                } else {
                    Ok(i)
                }
            },
            &mut |_, _, _| {},
        );
        assert!(matches!(r, Err(BenchError::Worker(m)) if m == "task 1 failed"));
    }
}
