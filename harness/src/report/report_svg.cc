#include "report_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace capq::report {

std::string Esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

std::string Px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string TickLabel(double v, double step, bool integer) {
  if (integer) return FormatFixed(v, 0);
  int decimals = 0;
  double s = step;
  while (decimals < 4 && std::fabs(s - std::round(s)) > 1e-9) {
    s *= 10;
    ++decimals;
  }
  return FormatFixed(v, decimals);
}

}  // namespace

Axis NiceAxis(double lo, double hi, int target, std::string label, bool integer) {
  Axis a;
  a.label = std::move(label);
  a.integer = integer;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12) hi = lo + (integer ? 1 : std::max(1e-3, std::fabs(lo) * 0.1 + 1e-3));
  double raw = (hi - lo) / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  if (integer) step = std::max(1.0, std::round(step));
  a.min = std::floor(lo / step) * step;
  a.max = std::ceil(hi / step) * step;
  if (a.max <= a.min) a.max = a.min + step;
  for (double t = a.min; t <= a.max + step * 1e-6; t += step) a.ticks.push_back(t);
  return a;
}

Plot::Plot(int width, int height, Axis x, Axis y)
    : width_(width), height_(height), x_(std::move(x)), y_(std::move(y)) {}

double Plot::X(double v) const {
  double w = width_ - left - right;
  return left + (v - x_.min) / (x_.max - x_.min) * w;
}

double Plot::Y(double v) const {
  double h = height_ - top - bottom;
  return top + h - (v - y_.min) / (y_.max - y_.min) * h;
}

void Plot::Circle(double x, double y, double r, const std::string& cls, const std::string& title) {
  if (!std::isfinite(x) || !std::isfinite(y)) return;
  body_ += "<circle class=\"" + cls + "\" cx=\"" + Px(X(x)) + "\" cy=\"" + Px(Y(y)) + "\" r=\"" +
           Px(r) + "\"><title>" + Esc(title) + "</title></circle>\n";
}

void Plot::Marker(double x, double y, const std::string& shape, const std::string& cls,
                  const std::string& title) {
  if (!std::isfinite(x) || !std::isfinite(y)) return;
  double px = X(x), py = Y(y);
  std::string d;
  if (shape == "tri") {
    d = "M" + Px(px) + "," + Px(py - 4) + " L" + Px(px + 3.5) + "," + Px(py + 2.5) + " L" +
        Px(px - 3.5) + "," + Px(py + 2.5) + " Z";
  } else {
    d = "M" + Px(px - 4) + "," + Px(py) + " L" + Px(px + 4) + "," + Px(py);
  }
  body_ += "<path class=\"" + cls + "\" d=\"" + d + "\"><title>" + Esc(title) + "</title></path>\n";
}

void Plot::Line(double x1, double y1, double x2, double y2, const std::string& cls) {
  if (!std::isfinite(x1) || !std::isfinite(y1) || !std::isfinite(x2) || !std::isfinite(y2)) return;
  body_ += "<line class=\"" + cls + "\" x1=\"" + Px(X(x1)) + "\" y1=\"" + Px(Y(y1)) + "\" x2=\"" +
           Px(X(x2)) + "\" y2=\"" + Px(Y(y2)) + "\"/>\n";
}

void Plot::HLine(double y, const std::string& cls, const std::string& label,
                 const std::string& anchor) {
  if (!std::isfinite(y)) return;
  double py = Y(y);
  body_ += "<line class=\"" + cls + "\" x1=\"" + Px(left) + "\" y1=\"" + Px(py) + "\" x2=\"" +
           Px(width_ - right) + "\" y2=\"" + Px(py) + "\"/>\n";
  if (!label.empty()) {
    double px = anchor == "start"    ? left + 4
                : anchor == "middle" ? (left + width_ - right) / 2.0
                                     : width_ - right - 4;
    body_ += "<text class=\"" + cls + "-label\" x=\"" + Px(px) + "\" y=\"" + Px(py - 4) +
             "\" text-anchor=\"" + anchor + "\">" + Esc(label) + "</text>\n";
  }
}

void Plot::Band(double x0, double x1, const std::string& cls, const std::string& label) {
  double a = X(std::max(x0, x_.min)), b = X(std::min(x1, x_.max));
  body_ += "<rect class=\"" + cls + "\" x=\"" + Px(a) + "\" y=\"" + Px(top) + "\" width=\"" +
           Px(std::max(0.0, b - a)) + "\" height=\"" + Px(height_ - top - bottom) + "\"/>\n";
  if (!label.empty()) {
    body_ += "<text class=\"" + cls + "-label\" x=\"" + Px((a + b) / 2) + "\" y=\"" + Px(top + 12) +
             "\" text-anchor=\"middle\">" + Esc(label) + "</text>\n";
  }
}

void Plot::HBand(double y0, double y1, const std::string& cls, const std::string& label,
                 const std::string& anchor) {
  if (!std::isfinite(y0) || !std::isfinite(y1)) return;
  double a = Y(std::max(y0, y1)), b = Y(std::min(y0, y1));
  body_ += "<rect class=\"" + cls + "\" x=\"" + Px(left) + "\" y=\"" + Px(a) + "\" width=\"" +
           Px(width_ - left - right) + "\" height=\"" + Px(std::max(1.0, b - a)) + "\"/>\n";
  if (!label.empty()) {
    double px = anchor == "start" ? left + 6 : width_ - right - 6;
    body_ += "<text class=\"" + cls + "-label\" x=\"" + Px(px) + "\" y=\"" + Px(a - 3) +
             "\" text-anchor=\"" + anchor + "\">" + Esc(label) + "</text>\n";
  }
}

void Plot::Rect(double x0, double y0, double x1, double y1, const std::string& cls,
                const std::string& title) {
  double a = X(std::min(x0, x1)), b = X(std::max(x0, x1));
  double c = Y(std::max(y0, y1)), d = Y(std::min(y0, y1));
  body_ += "<rect class=\"" + cls + "\" x=\"" + Px(a) + "\" y=\"" + Px(c) + "\" width=\"" +
           Px(std::max(1.0, b - a)) + "\" height=\"" + Px(std::max(1.0, d - c)) + "\"><title>" +
           Esc(title) + "</title></rect>\n";
}

void Plot::Text(double x, double y, const std::string& text, const std::string& cls,
                const std::string& anchor) {
  TextPx(X(x), Y(y), text, cls, anchor);
}

void Plot::TextPx(double px, double py, const std::string& text, const std::string& cls,
                  const std::string& anchor) {
  body_ += "<text class=\"" + cls + "\" x=\"" + Px(px) + "\" y=\"" + Px(py) + "\" text-anchor=\"" +
           anchor + "\">" + Esc(text) + "</text>\n";
}

std::string Plot::Render(const std::string& aria_label) const {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" +
                  std::to_string(width_) + "\" height=\"" + std::to_string(height_) +
                  "\" viewBox=\"0 0 " + std::to_string(width_) + " " + std::to_string(height_) +
                  "\" role=\"img\" aria-label=\"" + Esc(aria_label) + "\">\n";
  double x0 = left, x1 = width_ - right, y0 = top, y1 = height_ - bottom;
  // Grid and ticks.
  double ystep = y_.ticks.size() > 1 ? y_.ticks[1] - y_.ticks[0] : 1;
  for (size_t i = 0; i < y_.ticks.size(); ++i) {
    double t = y_.ticks[i];
    double py = Y(t);
    std::string label =
        i < y_.tick_labels.size() ? Esc(y_.tick_labels[i]) : TickLabel(t, ystep, y_.integer);
    s += "<line class=\"grid\" x1=\"" + Px(x0) + "\" y1=\"" + Px(py) + "\" x2=\"" + Px(x1) +
         "\" y2=\"" + Px(py) + "\"/>\n";
    s += "<text class=\"tick\" x=\"" + Px(x0 - 6) + "\" y=\"" + Px(py + 4) +
         "\" text-anchor=\"end\">" + label + "</text>\n";
  }
  double xstep = x_.ticks.size() > 1 ? x_.ticks[1] - x_.ticks[0] : 1;
  for (size_t i = 0; i < x_.ticks.size(); ++i) {
    double t = x_.ticks[i];
    double px = X(t);
    std::string label =
        i < x_.tick_labels.size() ? Esc(x_.tick_labels[i]) : TickLabel(t, xstep, x_.integer);
    s += "<line class=\"tickmark\" x1=\"" + Px(px) + "\" y1=\"" + Px(y1) + "\" x2=\"" + Px(px) +
         "\" y2=\"" + Px(y1 + 4) + "\"/>\n";
    s += "<text class=\"tick\" x=\"" + Px(px) + "\" y=\"" + Px(y1 + 16) +
         "\" text-anchor=\"middle\">" + label + "</text>\n";
  }
  s += "<rect class=\"frame\" x=\"" + Px(x0) + "\" y=\"" + Px(y0) + "\" width=\"" + Px(x1 - x0) +
       "\" height=\"" + Px(y1 - y0) + "\"/>\n";
  s += "<text class=\"axis-label\" x=\"" + Px((x0 + x1) / 2) + "\" y=\"" + Px(height_ - 8) +
       "\" text-anchor=\"middle\">" + Esc(x_.label) + "</text>\n";
  s += "<text class=\"axis-label\" transform=\"translate(14," + Px((y0 + y1) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + Esc(y_.label) + "</text>\n";
  s += body_;
  s += "</svg>\n";
  return s;
}

}  // namespace capq::report
