//! The run page's picture: an inline SVG timeline drawn on the server, one
//! lane per issue of the run, with bars for agent launches (coloured by
//! role) and for the time spent blocked, and marks for review rounds and
//! merges. Each shape carries a `<title>`, which browsers show on hover or
//! long-press without any script.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::story::Story;

/// The drawing's coordinate width; the SVG scales to the page's width.
const WIDTH: f64 = 1000.0;
/// Where the time axis starts (left of it: the lane labels).
const PLOT_LEFT: f64 = 70.0;
const PLOT_RIGHT: f64 = 990.0;
const LANE: f64 = 30.0;
const TOP: f64 = 8.0;
/// A bar shorter than this is widened so that it stays visible.
const MIN_BAR: f64 = 3.0;

/// The fill of a launch bar for `role`.
pub fn role_colour(role: &str) -> &'static str {
    match role {
        "implement" => "#2f6fca",
        "review" => "#8a3fb0",
        "fix" => "#d9751e",
        "epic" | "update_epic" => "#168f7a",
        _ => "#707070",
    }
}

struct Scale {
    start: DateTime<Utc>,
    span_ms: f64,
}

impl Scale {
    fn x(&self, at: DateTime<Utc>) -> f64 {
        let ms = (at - self.start).num_milliseconds().max(0) as f64;
        let fraction = (ms / self.span_ms).min(1.0);
        PLOT_LEFT + fraction * (PLOT_RIGHT - PLOT_LEFT)
    }

    /// `from`..`to` as an x and a width at least [`MIN_BAR`].
    fn bar(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> (f64, f64) {
        let x = self.x(from);
        (x, (self.x(to) - x).max(MIN_BAR))
    }
}

fn round1(value: f64) -> String {
    format!("{value:.1}")
}

/// The timeline of `story`, or nothing for a run without a single lane.
pub fn timeline(story: &Story<'_>) -> Markup {
    let scale = Scale {
        start: story.start,
        span_ms: ((story.end - story.start).num_milliseconds().max(1)) as f64,
    };
    let lanes = story.sections.len().max(1) as f64;
    let height = TOP + lanes * LANE + 22.0;
    let lane_y = |index: usize| TOP + index as f64 * LANE;
    html! {
        svg.timeline viewBox={ "0 0 " (WIDTH) " " (round1(height)) } role="img"
            aria-label="Timeline of the run: one lane per issue" {
            @for (index, section) in story.sections.iter().enumerate() {
                @let y = lane_y(index);
                @let (x, w) = scale.bar(section.from, section.to);
                text x="4" y=(round1(y + 19.0)) font-size="13" {
                    @if let Some(issue) = section.issue { "#" (issue) } @else { "issue ?" }
                }
                rect x=(round1(x)) y=(round1(y + 2.0)) width=(round1(w)) height="24"
                    fill="#f1f1f1" {}
                @for launch in &section.launches {
                    @let ended = launch.ended_at.unwrap_or(story.end);
                    @let (x, w) = scale.bar(launch.started_at, ended);
                    rect x=(round1(x)) y=(round1(y + 7.0)) width=(round1(w)) height="14"
                        fill=(role_colour(&launch.role)) {
                        title { (launch.role) " · " (launch.profile) " · attempt " (launch.attempt)
                            @if let Some(outcome) = &launch.outcome { " · " (outcome) } }
                    }
                }
                @for round in &section.rounds {
                    circle cx=(round1(scale.x(round.at))) cy=(round1(y + 14.0)) r="5"
                        fill="#fff" stroke="#8a3fb0" stroke-width="2.5" {
                        title { "review round " (round.mark.round) ": " (round.outcome()) }
                    }
                }
                @if let Some(merged) = section.merged_at {
                    @let mx = scale.x(merged);
                    path d={ "M" (round1(mx)) " " (round1(y + 4.0)) " l6 10 l-6 10 l-6 -10 z" }
                        fill="#1d8a3a" { title { "merged" } }
                }
            }
            @for block in &story.blocks {
                @let (x, w) = scale.bar(block.from, block.to);
                rect x=(round1(x)) y=(round1(TOP)) width=(round1(w)) height=(round1(lanes * LANE))
                    fill="#c0392b" fill-opacity="0.18" stroke="#c0392b" stroke-width="1" {
                    title { @if block.open { "blocked (still)" } @else { "blocked" } }
                }
            }
            @let axis = TOP + lanes * LANE + 16.0;
            text x=(PLOT_LEFT) y=(round1(axis)) font-size="12" {
                (story.start.format("%H:%M:%S")) }
            text x=(PLOT_RIGHT) y=(round1(axis)) font-size="12" text-anchor="end" {
                (story.end.format("%H:%M:%S")) }
        }
    }
}

/// The key under the picture.
pub fn legend() -> Markup {
    html! {
        p.legend {
            @for role in ["implement", "review", "fix", "update_epic"] {
                span.key style={ "background:" (role_colour(role)) } {} " " (role) " "
            }
            span.key style="background:#c0392b;opacity:.4" {} " blocked "
            "○ review round ◆ merge"
        }
    }
}
