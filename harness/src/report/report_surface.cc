// Figure 3: the capacity surface. One bar per row at its proven level (or a lowered row's
// operating point), rows in order of request size; when the data merges qualifications of several
// servers (a fleet's, through `capq report DIR... --out FILE`), each row's bars stand side by side,
// one per server, so the same row reads across the fleet.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "report_internal.h"
#include "report_svg.h"

namespace capq::report {

namespace {

// "sha256:0123456789ab…": enough of a digest to tell images apart on a figure.
std::string ShortImage(const std::string& image) {
  size_t at = image.find("sha256:");
  if (at == std::string::npos || image.size() <= at + 7 + 12) return image;
  return image.substr(0, at + 7 + 12) + "…";
}

// One x position: a row id, with each server's qualification of it (nullptr where a server has
// none).
struct Slot {
  const RowInfo* row;
  std::vector<const RowQualification*> by_server;
};

struct Surface {
  std::vector<std::string> servers;  // in order of first appearance
  std::vector<Slot> slots;           // in order of request size
};

// Concurrency across shapes: a rate row's boundary is another quantity and stays out of it. A
// row qualified twice on one server takes a second slot rather than hiding the first.
Surface Collect(const CapacityData& d) {
  Surface s;
  for (const auto& q : d.rows) {
    if (q.row.open_loop()) continue;
    std::string server = ServerName(q);
    size_t j = std::find(s.servers.begin(), s.servers.end(), server) - s.servers.begin();
    if (j == s.servers.size()) s.servers.push_back(server);
    auto free_slot = std::find_if(s.slots.begin(), s.slots.end(), [&](const Slot& slot) {
      return slot.row->id == q.row.id &&
             (slot.by_server.size() <= j || slot.by_server[j] == nullptr);
    });
    if (free_slot == s.slots.end()) free_slot = s.slots.insert(s.slots.end(), Slot{&q.row, {}});
    free_slot->by_server.resize(std::max(free_slot->by_server.size(), j + 1), nullptr);
    free_slot->by_server[j] = &q;
  }
  std::stable_sort(s.slots.begin(), s.slots.end(), [](const Slot& a, const Slot& b) {
    return a.row->input_tokens + a.row->output_tokens < b.row->input_tokens + b.row->output_tokens;
  });
  return s;
}

// One bar of slot `i`, server `j` of `servers`, spanning the slot's 0.6 between them.
void Bar(Plot* p, const Axis& y, double i, size_t j, size_t servers, const RowQualification& q) {
  const double width = 0.6 / servers, x0 = i - 0.3 + width * j, mid = x0 + width / 2;
  std::optional<int> b = Boundary(q);
  const std::string cls = servers == 1 ? "bar row" : "bar row srv" + std::to_string(j % 6);
  if (!b) {
    p->Text(mid, y.max * 0.1, "no boundary", "tick");
    return;
  }
  std::string tip = q.row.id + ": " + std::to_string(*b) +
                    (q.status == QualifyStatus::kLowered ? " (noisy, lowered)" : "");
  if (servers > 1) tip += " on " + ServerName(q);
  p->Rect(x0, 0, x0 + width, *b, cls, tip);
  p->Circle(mid, *b, 4, "pt pass confirm", q.row.id);
  p->Text(mid, *b + y.max * 0.04,
          servers == 1 ? std::to_string(*b) + " — " + q.row.id : std::to_string(*b), "bar-label");
}

std::string Legend(const std::vector<std::string>& servers) {
  if (servers.size() < 2) return "";
  std::string html = "<div class=\"legend\">";
  for (size_t j = 0; j < servers.size(); ++j) {
    html +=
        "<span><i class=\"sw srv" + std::to_string(j % 6) + "\"></i>" + Esc(servers[j]) + "</span>";
  }
  return html + "</div>\n";
}

}  // namespace

std::string ServerName(const RowQualification& q) {
  const RowInfo& r = q.row;
  std::string name = r.engine;
  if (!r.sim_profile.empty()) {
    name += " " + std::filesystem::path(r.sim_profile).stem().string() + " ×" +
            FormatFixed(r.time_scale, 0);
  } else if (!r.image.empty()) {
    name += " " + ShortImage(r.image);
  }
  if (!r.hardware.empty()) name += " · " + r.hardware;
  if (!q.url.empty()) name += " at " + q.url;
  return name;
}

std::string FigSurface(const CapacityData& d) {
  Surface s = Collect(d);
  if (s.slots.size() < 2 && s.servers.size() < 2) return "";
  int max_c = 1, points = 0;
  for (const auto& slot : s.slots) {
    for (const auto* q : slot.by_server) {
      if (auto b = q ? Boundary(*q) : std::nullopt) max_c = std::max(max_c, *b), ++points;
    }
  }
  Axis x;
  x.min = -0.6;
  x.max = s.slots.size() - 0.4;
  for (size_t i = 0; i < s.slots.size(); ++i) {
    x.ticks.push_back(static_cast<double>(i));
    x.tick_labels.push_back(Shape(*s.slots[i].row) +
                            (s.servers.size() > 1 ? " " + s.slots[i].row->id : ""));
  }
  x.label = "request shape (input / output tokens)";
  Axis y = NiceAxis(0, max_c * 1.15 + 1, 6, "max passing concurrency", true);
  const int per_slot = s.servers.size() > 1 ? 90 + 40 * static_cast<int>(s.servers.size()) : 210;
  Plot p(std::max(420, per_slot * static_cast<int>(s.slots.size()) + 120), 320, x, y);
  for (size_t i = 0; i < s.slots.size(); ++i) {
    const auto& by_server = s.slots[i].by_server;
    for (size_t j = 0; j < by_server.size(); ++j) {
      if (by_server[j]) Bar(&p, y, static_cast<double>(i), j, s.servers.size(), *by_server[j]);
    }
  }
  const std::string across =
      s.servers.size() > 1 ? " and " + std::to_string(s.servers.size()) + " servers" : "";
  return "<figure id=\"fig-surface\">\n" + p.Render("capacity surface across rows" + across) +
         Legend(s.servers) + "<figcaption><b>Figure 3 — capacity across request shapes" + across +
         "</b> (" + std::to_string(points) +
         " qualifications with an operating point). The maxima are alternatives, not quantities "
         "to add: a mixed queue needs its own experiment" +
         (s.servers.size() > 1 ? ", and a fleet's servers are compared, not summed: behind a "
                                 "router the fleet is qualified as one server"
                               : "") +
         ".</figcaption>\n</figure>\n";
}

}  // namespace capq::report
