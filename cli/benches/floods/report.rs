//! The result tables, in Markdown: the attacked process, the floods' own counts, the slow
//! connections' fates, and what the well-behaved clients saw.

use std::fmt::Write as _;

use einsora_testkit::bench::{count, median, quantile};

use super::legit::Seen;
use super::phase::{Measured, Phase};
use super::slow::Held;
use super::tally::Tally;

fn ms(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn cell(seen: &Seen) -> String {
    let mut sorted = seen.ms.clone();
    sorted.sort_by(f64::total_cmp);
    format!(
        "{}/{} · {} / {}",
        count(seen.ok as u64),
        count(seen.sent as u64),
        ms(quantile(&sorted, 0.5)),
        ms(quantile(&sorted, 0.99))
    )
}

fn pooled(runs: &[Measured], f: impl Fn(&Measured) -> &Seen) -> Seen {
    let mut all = Seen::default();
    for r in runs {
        all.merge(f(r));
    }
    all
}

fn words(map: &std::collections::BTreeMap<String, u64>) -> String {
    map.iter()
        .map(|(w, n)| format!("{w} {}", count(*n)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The tables and the footer, to follow the report's header.
pub fn render(phases: &[(Phase, Vec<Measured>)], footer: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nThe attacked process (medians of the rounds; CPU in % of one core, the host's in % of all its cores):\n"
    );
    let _ = writeln!(
        out,
        "| phase | rounds | process | CPU before / during / after | host CPU during | RSS MB before / peak / after | log KB |"
    );
    let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---:|");
    for (phase, runs) in phases {
        let med = |f: &dyn Fn(&Measured) -> f64| median(runs.iter().map(f));
        let mb = |kib: u64| kib as f64 / 1024.0;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} / {:.1} / {:.1} | {:.1} | {:.1} / {:.1} / {:.1} | {:.0} |",
            phase.name,
            runs.len(),
            phase.target.name(),
            med(&|m| m.before.process),
            med(&|m| m.during.process),
            med(&|m| m.after.process),
            med(&|m| m.during.host),
            med(&|m| mb(m.rss_before)),
            med(&|m| mb(m.rss_peak)),
            med(&|m| mb(m.rss_after)),
            med(&|m| m.log_bytes as f64 / 1024.0),
        );
    }

    let _ = writeln!(out, "\nThe floods' own counts (totals over the rounds):\n");
    let _ = writeln!(
        out,
        "| phase | sent | sent a second (median of the rounds) | how each ended | also |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---|");
    for (phase, runs) in phases {
        let mut total = Tally::default();
        let mut any = false;
        for t in runs.iter().filter_map(|m| m.tally.as_ref()) {
            total.merge(t);
            any = true;
        }
        if !any {
            continue;
        }
        let mut also = vec![words(&total.notes)];
        let flags: Vec<String> = runs
            .iter()
            .filter_map(|m| m.flag.as_ref())
            .map(|(what, at)| format!("{what} (+{at:.1} s)"))
            .collect();
        if !flags.is_empty() {
            also.push(format!(
                "the machine flagged during the phase, latest: {}",
                flags.join(", ")
            ));
        } else if phase.name.starts_with("sync") {
            also.push("the machine not flagged during the phase".to_owned());
        }
        also.retain(|a| !a.is_empty());
        let also = also.join("; ");
        let rate = median(
            runs.iter()
                .filter_map(|m| m.tally.as_ref())
                .map(|t| t.sent as f64 / phase.window.as_secs_f64()),
        );
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            phase.name,
            count(total.sent),
            count(rate.round() as u64),
            words(&total.outcomes),
            also
        );
    }

    let _ = writeln!(
        out,
        "\nSlow and idle connections (totals over the rounds; refused: closed within 1 s of connecting; closed: by the server, seconds after connecting; open at the end: as the client sees it; server side: its ESTABLISHED sockets of the group, accepted or queued, the most at once in a round and at the end, from /proc/net/tcp):\n"
    );
    let _ = writeln!(
        out,
        "| phase | connections | tried | refused | closed | closed after p50 / max s | answered first | open at the end | connect failed | server side: peak / end |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (phase, runs) in phases {
        let mut groups: Vec<Held> = Vec::new();
        for m in runs {
            for h in &m.held {
                match groups.iter_mut().find(|g| g.label == h.label) {
                    Some(g) => g.merge(h),
                    None => groups.push(h.clone()),
                }
            }
        }
        for g in groups {
            let mut after = g.closed_after.clone();
            after.sort_by(f64::total_cmp);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.1} / {:.1} | {} | {} | {} | {} / {} |",
                phase.name,
                g.label,
                count(g.tried as u64),
                count(g.refused as u64),
                count(after.len() as u64),
                quantile(&after, 0.5),
                after.last().copied().unwrap_or(f64::NAN),
                count(g.answered as u64),
                count(g.open_at_end as u64),
                count(g.connect_failed as u64),
                count(g.server_peak as u64),
                count(g.server_end as u64),
            );
        }
    }

    let _ = writeln!(
        out,
        "\nWhat the roles logged during each phase (EINSORA_LOG=info; lines over the rounds, the three most frequent):\n"
    );
    let _ = writeln!(out, "| phase | lines | most frequent |");
    let _ = writeln!(out, "|---|---:|---|");
    for (phase, runs) in phases {
        let mut lines: std::collections::BTreeMap<String, u64> = Default::default();
        for m in runs {
            for (k, n) in &m.log_lines {
                *lines.entry(k.clone()).or_default() += n;
            }
        }
        let total: u64 = lines.values().sum();
        let mut top: Vec<(String, u64)> = lines.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let top: Vec<String> = top
            .iter()
            .take(3)
            .map(|(k, n)| format!("{} × {k}", count(*n)))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            phase.name,
            count(total),
            top.join("; ").replace('|', "\\|")
        );
    }

    let _ = writeln!(
        out,
        "\nWhat the well-behaved clients saw (the rounds pooled; ok/sent · p50 / p99 ms; push and report are timed against the store's timeline, whose times are whole milliseconds):\n"
    );
    let _ = writeln!(
        out,
        "| phase | agent push | agent report | enrolment | gateway GET | proxy GET | agent's stream |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---|");
    let mut failures = Vec::new();
    for (phase, runs) in phases {
        let clients: [(&str, Seen); 5] = [
            ("agent push", pooled(runs, |m| &m.push)),
            ("agent report", pooled(runs, |m| &m.report)),
            ("enrolment", pooled(runs, |m| &m.enrol)),
            ("gateway GET", pooled(runs, |m| &m.gateway)),
            ("proxy GET", pooled(runs, |m| &m.proxy)),
        ];
        for (name, seen) in &clients {
            for (why, n) in &seen.failures {
                failures.push(format!("{} / {name}: {why} × {n}", phase.name));
            }
        }
        let ends: Vec<String> = runs.iter().flat_map(|m| m.agent_ends.clone()).collect();
        let stream = if ends.is_empty() {
            "held".to_owned()
        } else {
            format!("ended: {}", ends.join(", "))
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {stream} |",
            phase.name,
            cell(&clients[0].1),
            cell(&clients[1].1),
            cell(&clients[2].1),
            cell(&clients[3].1),
            cell(&clients[4].1),
        );
    }
    if !failures.is_empty() {
        let _ = writeln!(out, "\nThe well-behaved clients' failures:\n");
        for f in failures {
            let _ = writeln!(out, "- {f}");
        }
    }
    let left: usize = phases
        .iter()
        .flat_map(|(_, r)| r.iter().map(|m| m.left))
        .sum();
    if left > 0 {
        let _ = writeln!(
            out,
            "\n{left} of the agent's notebooks were still not deleted 20 s after their phase."
        );
    }
    if !footer.is_empty() {
        let _ = writeln!(out);
        for line in footer {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
