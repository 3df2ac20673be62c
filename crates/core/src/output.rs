//! What a workload prints: its lines, as the control plane keeps them (ADR 0011). A line's text
//! is redacted before it is stored: anything shaped like Einsora's credentials is cut to its
//! public prefix, as in reasons, and the workload's own token is removed whole.

use crate::words::word_enum;

/// The longest line kept whole, in bytes; a longer one is cut there (on a character boundary)
/// and marked with `…`.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

word_enum! {
    /// Which of its outputs a line came from.
    pub enum OutputStream ("output stream") {
        Stdout = "stdout",
        Stderr = "stderr",
    }
}

/// A line a workload printed, as its agent read it from its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintedLine {
    pub stream: OutputStream,
    pub printed_at: time::OffsetDateTime,
    /// At most [`MAX_LINE_BYTES`]; redacted before the store keeps it.
    pub text: String,
    /// Lines its source dropped just before it (the agent's cap of a native workload's log).
    pub dropped_before: u64,
    /// Lines may be missing just before it, how many unknown: a container's engine log rotated
    /// them out before its agent read them (the engine keeps no count).
    pub gap_before: bool,
    /// Where it ends in its source: bytes into a native workload's log, or the engine log's
    /// timestamp in nanoseconds for a container. Within an attempt, ends only grow.
    pub end: u64,
}

/// What one workload printed since its agent's last report: its attempt's source read up to
/// `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintedOutput {
    pub workload_id: crate::ids::WorkloadId,
    pub attempt: u32,
    pub to: u64,
    pub lines: Vec<PrintedLine>,
}

/// Where the store has a workload's output up to: its agent reads its source from `offset`.
/// Offsets grow across a workload's attempts (bytes into its native log, or the engine log's
/// timestamps), so the store skips what ends at or before it whatever the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputResume {
    pub attempt: u32,
    pub offset: u64,
}

/// A line as it may be stored: `token` (the workload's own, if any) removed, every credential
/// shape cut to its public prefix, control characters but tabs made spaces, and the text cut to
/// [`MAX_LINE_BYTES`].
pub fn redact_line(text: &str, token: Option<&str>) -> String {
    let without_token = match token.filter(|t| !t.is_empty()) {
        Some(token) => text.replace(token, "[redacted]"),
        None => text.to_owned(),
    };
    let printable: String = without_token
        .chars()
        .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
        .collect();
    let mut out = crate::reasons::redact_secrets(&printable);
    if out.len() > MAX_LINE_BYTES {
        let mut cut = MAX_LINE_BYTES - '…'.len_utf8();
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workloads_token_and_credential_shapes_never_reach_the_store() {
        let line = "token=8f3a9c secret tsk_abcdefghijkl and enr_ZYXWVUTS, ticket tkt_0123456789";
        let kept = redact_line(line, Some("8f3a9c"));
        assert_eq!(
            kept,
            "token=[redacted] secret tsk_abcd… and enr_ZYXW…, ticket tkt_0123…"
        );
        assert_eq!(
            redact_line("key=isk_Ab3xQ9zzzzzzzzzzzzzzzzzzzzzzzzzzzz", None),
            "key=isk_Ab3x…",
            "an inference key as an API token"
        );
        assert_eq!(
            redact_line("plain", Some("")),
            "plain",
            "an empty token is no token"
        );
    }

    #[test]
    fn control_characters_become_spaces_and_long_lines_are_cut_on_a_character() {
        assert_eq!(redact_line("a\u{1b}[31mb\rc\td", None), "a [31mb c\td");
        let long = "é".repeat(MAX_LINE_BYTES);
        let kept = redact_line(&long, None);
        assert!(kept.len() <= MAX_LINE_BYTES, "{}", kept.len());
        assert!(kept.ends_with('…'));
        assert!(kept.trim_end_matches('…').chars().all(|c| c == 'é'));
    }
}
