//! SVG charts for the bench report, drawn with plotters: lines for a value
//! against a size (throughput by concurrency, RSS by runs), bars for a value
//! by category (requests by route).

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

/// One named line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const SIZE: (u32, u32) = (720, 420);
const PALETTE: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn plot_error(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing a chart: {error}")
}

/// Draws `series` as lines with markers into the SVG file `path`.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    let points = series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_max) = points.fold((1.0_f64, 1.0_f64), |(x, y), &(px, py)| {
        (x.max(px), y.max(py))
    });
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max * 1.05, 0.0..y_max * 1.1)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(plot_error)?;
    for (index, line) in series.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(plot_error)?
            .label(line.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )
            .map_err(plot_error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)
}

/// Draws one bar per `(category, value)` into the SVG file `path`.
pub fn bar_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> anyhow::Result<()> {
    let y_max = bars.iter().map(|(_, v)| *v).fold(1.0_f64, f64::max);
    let count = bars.len().max(1);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(120)
        .y_label_area_size(64)
        .build_cartesian_2d((0..count).into_segmented(), 0.0..y_max * 1.1)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_label)
        .x_labels(count)
        .x_label_formatter(&|segment| match segment {
            SegmentValue::CenterOf(index) | SegmentValue::Exact(index) => bars
                .get(*index)
                .map(|(name, _)| name.clone())
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .x_label_style(
            ("sans-serif", 11)
                .into_font()
                .transform(FontTransform::Rotate90),
        )
        .draw()
        .map_err(plot_error)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(index, (_, value))| {
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(index), 0.0),
                    (SegmentValue::Exact(index + 1), *value),
                ],
                PALETTE[0].filled(),
            );
            bar.set_margin(0, 0, 4, 4);
            bar
        }))
        .map_err(plot_error)?;
    root.present().map_err(plot_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_bar_charts_write_svg_naming_their_series() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lines = dir.path().join("lines.svg");
        line_chart(
            &lines,
            "throughput",
            "concurrency",
            "req/s",
            &[
                Series {
                    name: "autoforge".into(),
                    points: vec![(1.0, 600.0), (16.0, 2400.0)],
                },
                Series {
                    name: "probot".into(),
                    points: vec![(1.0, 1800.0), (16.0, 2000.0)],
                },
            ],
        )
        .expect("line chart");
        let svg = std::fs::read_to_string(&lines).expect("svg");
        assert!(svg.starts_with("<svg"), "{svg:.80}");
        assert!(svg.contains("autoforge") && svg.contains("probot"));

        let bars = dir.path().join("bars.svg");
        bar_chart(
            &bars,
            "requests",
            "count",
            &[("GET /issues".into(), 12.0), ("POST /pulls".into(), 3.0)],
        )
        .expect("bar chart");
        let svg = std::fs::read_to_string(&bars).expect("svg");
        assert!(svg.contains("GET /issues") && svg.contains("POST /pulls"));
    }
}
