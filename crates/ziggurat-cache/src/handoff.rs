//! A step of a miss handed to the front end's other side as an object (an
//! event loop that awaits the loader, a thread that runs a refresh): the
//! step's kind, its value or miss, and the rule that whoever finishes the
//! step first ends it, exactly once, while the others find it ended.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::cache::Cache;
use crate::miss::{Miss, Step};

/// The kind of a step of a miss, as every front end names and numbers it
/// (Python's `ziggurat.loader.StepKind`, Node.js's `MissState.step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StepKind {
    /// A value or a cached miss (with, maybe, a refresh to run); where a
    /// front end's null may be a value, the value code `NEGATIVE` tells a
    /// cached miss.
    Hit = 1,
    /// This process holds the key's lease: load.
    Load = 2,
    /// Another caller loads: wait, then ask for the next step.
    Wait = 3,
    /// No segment: the front end shares one load among its own threads.
    Local = 4,
}

impl StepKind {
    /// Every kind.
    pub const ALL: [StepKind; 4] = [
        StepKind::Hit,
        StepKind::Load,
        StepKind::Wait,
        StepKind::Local,
    ];

    /// The kind of `step`.
    ///
    /// ```
    /// use ziggurat_cache::{Step, StepKind};
    /// assert_eq!(StepKind::of(&Step::<u8>::Negative), StepKind::Hit);
    /// ```
    pub fn of<V>(step: &Step<V>) -> StepKind {
        match step {
            Step::Value(..) | Step::Negative => StepKind::Hit,
            Step::Load(_) => StepKind::Load,
            Step::Wait(_) => StepKind::Wait,
            Step::NoSegment(_) => StepKind::Local,
        }
    }

    /// The kind's name: HIT, LOAD, WAIT, LOCAL.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Hit => "HIT",
            StepKind::Load => "LOAD",
            StepKind::Wait => "WAIT",
            StepKind::Local => "LOCAL",
        }
    }
}

/// A [`Step`] as an object of the front end's (shared between its threads).
///
/// ```
/// use ziggurat_cache::{Handoff, Step, StepKind};
/// let h = Handoff::new(Step::<u8>::Value(7, None));
/// assert_eq!((h.kind(), h.value(), h.label()), (StepKind::Hit, Some(&7), "HIT"));
/// assert!(h.take_load().is_none());
/// ```
pub struct Handoff<V> {
    kind: StepKind,
    /// HIT: the value (None: a cached miss).
    value: Option<V>,
    /// LOAD, WAIT, LOCAL: the miss; HIT: the refresh this process took, if any.
    miss: Option<Miss<V>>,
    /// The lease is given back exactly once, whoever finishes the step.
    finished: AtomicBool,
}

impl<V> Handoff<V> {
    /// The handoff of `step`.
    pub fn new(step: Step<V>) -> Handoff<V> {
        let kind = StepKind::of(&step);
        let (value, miss) = match step {
            Step::Value(v, refresh) => (Some(v), refresh),
            Step::Negative => (None, None),
            Step::Load(m) | Step::Wait(m) | Step::NoSegment(m) => (None, Some(m)),
        };
        Handoff {
            kind,
            value,
            miss,
            finished: AtomicBool::new(false),
        }
    }

    /// The step's kind.
    pub fn kind(&self) -> StepKind {
        self.kind
    }

    /// HIT: the value (None for a cached miss).
    pub fn value(&self) -> Option<&V> {
        self.value.as_ref()
    }

    /// The step's name: HIT, REFRESH (a load that refreshes), LOAD, WAIT, LOCAL.
    pub fn label(&self) -> &'static str {
        match self.kind {
            StepKind::Load if self.miss.as_ref().is_some_and(|m| m.is_refresh()) => "REFRESH",
            k => k.name(),
        }
    }

    /// Whether this call is the one that finishes the step.
    pub fn finish(&self) -> bool {
        !self.finished.swap(true, Ordering::AcqRel)
    }

    /// The miss of a step of `kind`, not finishing it.
    pub fn miss_of(&self, kind: StepKind) -> Option<&Miss<V>> {
        self.miss.as_ref().filter(|_| self.kind == kind)
    }

    /// A load's miss (LOAD, LOCAL or a refresh) to end now, finishing the
    /// step; None when the step is no load or was ended already.
    pub fn take_load(&self) -> Option<&Miss<V>> {
        self.miss
            .as_ref()
            .filter(|_| self.kind != StepKind::Hit && self.finish())
    }

    /// HIT: the refresh this process took, as a LOAD step, handed out once.
    pub fn take_refresh(&self, clone: impl Fn(&V) -> V) -> Option<Handoff<V>> {
        if self.kind != StepKind::Hit || !self.finish() {
            return None;
        }
        self.successor(clone).map(|m| Handoff::new(Step::Load(m)))
    }

    /// The step's miss, copied to continue from (after a WAIT).
    pub fn successor(&self, clone: impl Fn(&V) -> V) -> Option<Miss<V>> {
        self.miss.as_ref().map(|m| m.successor(clone))
    }

    /// A LOAD step whose task was cancelled, or answered by the tier below:
    /// gives the lease back, once.
    pub fn give_back(&self, cache: &Cache, key: &[u8]) {
        if let Some(m) = self.miss_of(StepKind::Load) {
            if self.finish() {
                cache.give_back(key, m);
            }
        }
    }
}
