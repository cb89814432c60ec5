//! The reader never moves past a hole without clearing: whatever entries it
//! reads (its own or another host's, any numbers and generations, forged or
//! not), an entry it takes without a clear is the next one, in the generation
//! it follows.

use proptest::prelude::*;
use ziggurat_cluster::{signed_body, Follower, Signer};

proptest! {
    #[test]
    fn no_entry_is_taken_past_a_hole_without_a_clear(
        last in 0u64..20,
        gen in 0u64..3,
        entries in proptest::collection::vec((0u64..25, 0u64..3, any::<bool>(), any::<bool>()), 1..30),
    ) {
        let s = Signer::new(b"c", &[b"0123456789abcdef".to_vec()]).unwrap();
        let f = Follower::new("a1");
        let (mut last, mut gen) = (last, gen);
        for (seq, g, own, genuine) in entries {
            let (seq_s, g_s) = (seq.to_string(), g.to_string());
            let host = if own { "a1" } else { "b2" };
            let m = if genuine { s.event_mac(&signed_body(host, "del", b"k", 5)).to_vec() } else { vec![0; 16] };
            let fields: Vec<(&[u8], &[u8])> = vec![(b"s", seq_s.as_bytes()), (b"h", host.as_bytes()),
                (b"o", b"del"), (b"k", b"k"), (b"w", b"5"), (b"g", g_s.as_bytes()), (b"m", &m)];
            let e = f.entry(&fields, last, gen, &s);
            if !own && !genuine {
                prop_assert!(e.seq.is_none() && e.apply.is_none() && e.clears.is_empty(), "a forged entry has no effect");
                continue;
            }
            let Some(taken) = e.seq else { continue };
            if e.clears.is_empty() {
                prop_assert_eq!(taken, last + 1, "taken without a clear: the next one");
                prop_assert!(g == 0 || gen == 0 || g == gen);
            }
            // Another host's event is applied when it is the next one, or the first of a
            // new generation (after the clear); the host's own never are.
            let renewed = e.clears.contains(&ziggurat_cluster::Clear::GenerationChanged);
            prop_assert_eq!(e.apply.is_some(), !own && (taken == last + 1 || renewed));
            last = taken;
            if let Some(n) = e.generation { gen = n; }
        }
    }
}
