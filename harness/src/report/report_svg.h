// Inline SVG for the report: a small plot builder (linear axes with round ticks, points, lines,
// bands, bars, text). Everything renders to a string; no scripts, no external resources.
// Private to the report layer (its figures).
#pragma once

#include <string>
#include <vector>

#include "capq/text.h"

namespace capq::report {

// HTML/XML escaping for text and attribute values.
std::string Esc(const std::string& s);

struct Axis {
  double min = 0, max = 1;
  std::vector<double> ticks;
  std::string label;
  bool integer = false;                  // integer tick labels (concurrency, arrival index)
  std::vector<std::string> tick_labels;  // when set, replaces the numeric label of each tick
};

// An axis from [lo, hi] with about `target` round ticks (1, 2, 2.5, 5 x 10^k); the range is widened
// to the outer ticks. Integer axes only get integer ticks.
Axis NiceAxis(double lo, double hi, int target, std::string label, bool integer = false);

class Plot {
 public:
  Plot(int width, int height, Axis x, Axis y);

  double X(double v) const;
  double Y(double v) const;

  // `cls` goes into the class attribute; `title` becomes a hover tooltip (<title>).
  void Circle(double x, double y, double r, const std::string& cls, const std::string& title);
  void Marker(double x, double y, const std::string& shape, const std::string& cls,
              const std::string& title);  // shape: "tri" | "dash"
  void Line(double x1, double y1, double x2, double y2, const std::string& cls);
  // `anchor` "end" puts the label at the right edge, "start" at the left, "middle" in between.
  void HLine(double y, const std::string& cls, const std::string& label,
             const std::string& anchor = "end");
  void Band(double x0, double x1, const std::string& cls, const std::string& label);  // x range
  void HBand(double y0, double y1, const std::string& cls, const std::string& label,
             const std::string& anchor = "start");  // y range
  void Rect(double x0, double y0, double x1, double y1, const std::string& cls,
            const std::string& title);
  void Text(double x, double y, const std::string& text, const std::string& cls,
            const std::string& anchor = "middle");
  // Text at pixel coordinates inside the plot area (e.g. a verdict strip along the top).
  void TextPx(double px, double py, const std::string& text, const std::string& cls,
              const std::string& anchor = "middle");

  std::string Render(const std::string& aria_label) const;

  int left = 64, right = 18, top = 26, bottom = 46;

 private:
  int width_, height_;
  Axis x_, y_;
  std::string body_;
};

}  // namespace capq::report
