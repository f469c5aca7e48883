//! A minimal SVG writer shared by the model card's curve and the report's charts:
//! dependency-free output that renders in any browser and on GitHub.

use std::fmt::Write;

/// Series colours (matplotlib's tab10), in the order charts use them.
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// An SVG document being written: white background and a centred title.
pub struct Svg {
    text: String,
    /// Width in pixels.
    pub w: f64,
    /// Height in pixels.
    pub h: f64,
}

impl Svg {
    /// Opens a document of `w`×`h` pixels with `title` centred at the top.
    pub fn new(w: f64, h: f64, title: &str) -> Svg {
        let mut text = String::new();
        let _ = write!(
            text,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>
"##,
            w / 2.0,
            escape(title)
        );
        Svg { text, w, h }
    }

    /// Appends raw SVG markup.
    pub fn raw(&mut self, markup: &str) {
        self.text.push_str(markup);
    }

    /// A horizontal grid line from `x0` to `x1` at `y`, labelled left of `x0`.
    pub fn hgrid(&mut self, x0: f64, x1: f64, y: f64, label: &str) {
        let _ = writeln!(
            self.text,
            r##"<line x1="{x0:.1}" y1="{y:.1}" x2="{x1:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            escape(label)
        );
    }

    /// A vertical grid line at `x` from `y_bottom` up to `y_top`, labelled below.
    pub fn vgrid(&mut self, x: f64, y_bottom: f64, y_top: f64, label: &str) {
        let _ = writeln!(
            self.text,
            r##"<line x1="{x:.1}" y1="{y_bottom:.1}" x2="{x:.1}" y2="{y_top:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            y_bottom + 16.0,
            escape(label)
        );
    }

    /// Text at (`x`, `y`) with an anchor of `start`, `middle` or `end`.
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, fill: &str, content: &str) {
        let _ = writeln!(
            self.text,
            r##"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" fill="{fill}">{}</text>"##,
            escape(content)
        );
    }

    /// A label centred on `x` (an x-axis title).
    pub fn x_title(&mut self, x: f64, y: f64, content: &str) {
        let _ = writeln!(
            self.text,
            r##"<text x="{x}" y="{y}" text-anchor="middle">{}</text>"##,
            escape(content)
        );
    }

    /// A label rotated to read upwards, centred on `y` (a y-axis title).
    pub fn y_title(&mut self, x: f64, y: f64, content: &str) {
        let _ = writeln!(
            self.text,
            r##"<text transform="translate({x},{y}) rotate(-90)" text-anchor="middle">{}</text>"##,
            escape(content)
        );
    }

    /// A polyline through `points`.
    pub fn polyline(
        &mut self,
        points: &[(f64, f64)],
        stroke: &str,
        width: f64,
        dash: Option<&str>,
    ) {
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let dash = dash.map_or(String::new(), |d| format!(r#" stroke-dasharray="{d}""#));
        let _ = writeln!(
            self.text,
            r##"<polyline fill="none" stroke="{stroke}" stroke-width="{width}"{dash} points="{}"/>"##,
            path.join(" ")
        );
    }

    /// A filled rectangle.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str) {
        let _ = writeln!(
            self.text,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}"/>"##
        );
    }

    /// A point with a vertical error bar from `y_lo` to `y_hi` (capped).
    pub fn error_bar(&mut self, x: f64, y: f64, y_lo: f64, y_hi: f64, colour: &str) {
        let _ = writeln!(
            self.text,
            r##"<line x1="{x:.1}" y1="{y_lo:.1}" x2="{x:.1}" y2="{y_hi:.1}" stroke="{colour}" stroke-width="2"/><line x1="{:.1}" y1="{y_lo:.1}" x2="{:.1}" y2="{y_lo:.1}" stroke="{colour}" stroke-width="2"/><line x1="{:.1}" y1="{y_hi:.1}" x2="{:.1}" y2="{y_hi:.1}" stroke="{colour}" stroke-width="2"/><circle cx="{x:.1}" cy="{y:.1}" r="5" fill="{colour}"/>"##,
            x - 8.0,
            x + 8.0,
            x - 8.0,
            x + 8.0
        );
    }

    /// Closes the document.
    pub fn finish(mut self) -> String {
        self.text.push_str("</svg>\n");
        self.text
    }
}

/// Escapes text for SVG content and attribute values.
pub fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_is_closed_and_text_escaped() {
        let mut s = Svg::new(100.0, 50.0, "a <b> & \"c\"");
        s.text(1.0, 2.0, "start", "#000", "x<y");
        let out = s.finish();
        assert!(out.starts_with("<svg xmlns="), "{out}");
        assert!(out.ends_with("</svg>\n"), "{out}");
        assert!(out.contains("a &lt;b&gt; &amp; &quot;c&quot;"), "{out}");
        assert!(out.contains(">x&lt;y</text>"), "{out}");
        assert!(!out.contains("<b>"), "{out}");
    }
}
