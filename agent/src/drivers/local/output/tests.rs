use super::*;
use einsora_core::output::OutputResume;

fn now() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH
}

#[test]
fn complete_lines_are_taken_and_a_partial_one_waits() {
    let (lines, end, _) = lines(b"one\r\ntwo\nthr", 100, None, 0, false, now());
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(texts, ["one", "two"]);
    assert_eq!(lines[0].end, 105);
    assert_eq!(end, 109, "up to the end of `two`");
}

#[test]
fn the_token_goes_and_what_was_dropped_is_counted_before_the_first_line() {
    let (lines, _, _) = lines(
        b"token abc123 here\nnext\n",
        0,
        Some("abc123"),
        7,
        false,
        now(),
    );
    assert_eq!(lines[0].text, "token [redacted] here");
    assert_eq!((lines[0].dropped_before, lines[1].dropped_before), (7, 0));
}

#[test]
fn a_line_that_fills_a_whole_read_is_taken_cut() {
    let long = vec![b'x'; READ_LIMIT];
    let (cut, end, skipping) = lines(&long, 0, None, 0, false, now());
    assert_eq!(cut.len(), 1);
    assert!(cut[0].text.len() <= MAX_LINE_BYTES);
    assert_eq!((end, skipping), (READ_LIMIT as u64, true));
    // Its rest, a secret's tail in it, is skipped up to its newline.
    let rest = b"cdefghijklmnop\nnext\n";
    let (after, end, skipping) = lines(rest, READ_LIMIT as u64, None, 0, true, now());
    let texts: Vec<&str> = after.iter().map(|l| l.text.as_str()).collect();
    assert_eq!((texts, skipping), (vec!["next"], false));
    assert_eq!(end, READ_LIMIT as u64 + rest.len() as u64);
    let (none, end, skipping) = lines(b"still the same line", 7, None, 0, true, now());
    assert_eq!((none.len(), end, skipping), (0, 7 + 19, true));
}

fn wanted(stream: u64, head: Option<u64>) -> Wanted {
    Wanted {
        workload: einsora_core::ids::WorkloadId::new().to_string(),
        gpus_missing: false,
        attempt: 2,
        mode: einsora_core::agent::Mode::Run,
        spec: einsora_proto::convert::PlacedSpec {
            kind: einsora_core::kind::WorkloadKind::Notebook,
            compute_class: "cpu-1c-2g".into(),
            accelerator: None,
            image: "jupyterlab".into(),
            runtime: "jupyterlab-cpu".into(),
            driver: "linux-native".into(),
            resources: None,
            requires_strong_isolation: false,
            egress: false,
            retired: false,
            params: None,
        },
        output: head.map(|offset| OutputResume { attempt: 2, offset }),
        stream,
    }
}

/// A new stream's first desired state moves the place back to the store's head; later ones
/// of the same stream don't (what is in flight would be read again for nothing).
#[test]
fn each_stream_starts_from_the_stores_head() {
    let mut cursors = Cursors::default();
    let first = wanted(1, Some(40));
    assert_eq!(cursors.from(&first), 40);
    cursors.advanced(&first.workload, first.attempt, 90);
    let later = Wanted {
        output: Some(OutputResume {
            attempt: 2,
            offset: 60,
        }),
        ..first.clone()
    };
    assert_eq!(cursors.from(&later), 90, "same stream: its own place");
    let reconnected = Wanted {
        stream: 2,
        ..later.clone()
    };
    assert_eq!(cursors.from(&reconnected), 60, "a new stream: the head");
    assert_eq!(cursors.from(&wanted(1, None)), 0, "never printed");
}

/// A place is in an attempt's own source once that attempt shipped from it, or when the store's
/// head is of that attempt; an earlier attempt's end is not (its source is another container's).
#[test]
fn a_place_knows_whose_source_it_is_in() {
    let mut cursors = Cursors::default();
    let resumed = wanted(1, Some(40));
    cursors.from(&resumed);
    assert!(
        cursors.in_attempt(&resumed.workload, 2),
        "the head is attempt 2's"
    );
    let next = Wanted {
        attempt: 3,
        ..resumed.clone()
    };
    assert_eq!(cursors.from(&next), 40);
    assert!(
        !cursors.in_attempt(&next.workload, 3),
        "40 is where attempt 2 ended"
    );
    cursors.advanced(&next.workload, 3, 70);
    assert!(cursors.in_attempt(&next.workload, 3));
    let never = wanted(1, None);
    cursors.from(&never);
    assert!(!cursors.in_attempt(&never.workload, 2), "nothing read yet");
}

#[test]
fn a_full_outbox_keeps_the_place() {
    let (outbox, inbox) = outbox();
    let mut cursors = Cursors::default();
    let w = wanted(1, None);
    assert_eq!(cursors.from(&w), 0);
    let many = "x\n".repeat(BATCH_LINES * (CAPACITY + 1));
    let (lines, _, _) = lines(many.as_bytes(), 0, None, 0, false, now());
    ship(&outbox, &mut cursors, &w, lines);
    let shipped = (CAPACITY * BATCH_LINES * 2) as u64;
    assert_eq!(cursors.from(&w), shipped, "up to the last batch taken");
    let mut inbox = inbox.try_lock().unwrap();
    let first = inbox.try_recv().unwrap();
    assert_eq!(
        first.stream, w.stream,
        "read under its stream's desired state"
    );
    let first = first.printed;
    assert_eq!(first.lines.len(), BATCH_LINES);
    assert_eq!(first.to, (BATCH_LINES * 2) as u64);
}
