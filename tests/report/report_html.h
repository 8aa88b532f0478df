// Pieces of a report page the report tests look into, found by their element ids.
#pragma once

#include <cstddef>
#include <string>

namespace capq::testing {

inline  // The text of <figure id="ID" ...> ... </figure>; empty when absent.
    std::string
    Figure(const std::string& html, const std::string& id) {
  size_t start = html.find("<figure id=\"" + id + "\"");
  if (start == std::string::npos) start = html.find("id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  size_t end = html.find("</figure>", start);
  return html.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

inline size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + 1)) ++n;
  return n;
}

inline  // The text of the element with id="ID" up to its closing </div>; empty when absent.
    std::string
    Div(const std::string& html, const std::string& id) {
  size_t start = html.find("id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</div>", start) - start);
}

inline  // The <table id="ID"> ... </table> text; empty when absent.
    std::string
    Table(const std::string& html, const std::string& id) {
  size_t start = html.find("<table id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</table>", start) - start);
}

}  // namespace capq::testing
