// capq probe as a user runs it: a corpus recorded from a server (here the embedded simulator in
// each dialect) passes its own check; the recorded llama.cpp corpus is compared and its
// differences listed; an edited recording shows exactly its edit and fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../capq_process.h"
#include "capq/sim/server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSource = CAPQ_SOURCE_DIR;

int Capq(const std::vector<std::string>& args, std::string* out) {
  return capq::testing::RunCapqCapturing(args, out);
}

std::string Profile(capq::sim::Dialect d) {
  return kSource + (d == capq::sim::Dialect::kLlamacpp ? "/rows/sim/profiles/llamacpp_tiny.yaml"
                                                       : "/rows/sim/profiles/small.yaml");
}

fs::path FreshDir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("capq_probe_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  return p;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::vector<json> Manifest(const fs::path& dir) {
  std::vector<json> out;
  std::istringstream in(Read(dir / "MANIFEST.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

const json* Entry(const std::vector<json>& m, const std::string& name) {
  for (const json& e : m) {
    if (e["name"] == name) return &e;
  }
  return nullptr;
}

// Records `engine`'s corpus from a fresh simulator speaking `d` into `dir`; returns the exit code.
int RecordFromSim(const std::string& engine, capq::sim::Dialect d, const fs::path& dir,
                  std::string* out) {
  capq::sim::ServerOptions o;
  o.profile_path = Profile(d);
  o.dialect = d;
  o.time_scale = 20;
  auto server = capq::sim::SimServer::Start(o);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return -1;
  return Capq({"probe", (*server)->url(), "--engine", engine, "--out", dir.string()}, out);
}

int Check(const fs::path& dir, capq::sim::Dialect d, std::string* out,
          const std::string& engine = "") {
  std::vector<std::string> args = {"probe", "--check", dir.string(), "--profile", Profile(d)};
  if (!engine.empty()) args.insert(args.end(), {"--engine", engine});
  return Capq(args, out);
}

struct Case {
  const char* engine;
  capq::sim::Dialect dialect;
};

class ProbeCommandTest : public ::testing::TestWithParam<Case> {};

// The corpus has the format of tests/data/conformance/llamacpp/ and what the brief asks.
void ExpectCorpus(const fs::path& dir, const Case& c) {
  const std::vector<json> m = Manifest(dir);
  int reqs = 0;
  for (const auto& f : fs::directory_iterator(dir)) reqs += f.path().extension() == ".req";
  EXPECT_EQ(static_cast<int>(m.size()), reqs);
  EXPECT_TRUE(fs::exists(dir / "INDEX.md"));
  for (const char* name : {"01-health", "02-v1-models", "06-metrics", "07-tokenize", "21-chat-c1",
                           "23-chat-c1", "30-burst16-stream01", "30-burst16-stream16"}) {
    ASSERT_NE(Entry(m, name), nullptr) << name;
    EXPECT_EQ((*Entry(m, name))["status"], 200) << name;
  }
  const std::string flush =
      c.dialect == capq::sim::Dialect::kLlamacpp ? "10-flush-slot7" : "10-flush";
  ASSERT_NE(Entry(m, flush), nullptr);
  ASSERT_NE(Entry(m, "40-over-context"), nullptr);
  EXPECT_EQ((*Entry(m, "40-over-context"))["status"], 400);
  EXPECT_EQ(Entry(m, "05-capq-sim") != nullptr, std::string(c.engine).rfind("sim:", 0) == 0);
  // A stream keeps its chunk framing, and its read times cover every byte.
  const std::string resp = Read(dir / "21-chat-c1.resp");
  EXPECT_NE(resp.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_EQ(resp.substr(resp.size() - 5), "0\r\n\r\n");
  EXPECT_EQ((*Entry(m, "21-chat-c1"))["event_kinds"], "R C F U D");
  std::istringstream times(Read(dir / "21-chat-c1.times.jsonl"));
  json last;
  for (std::string line; std::getline(times, line);) last = json::parse(line);
  EXPECT_EQ(last["off"].get<size_t>() + last["len"].get<size_t>(), resp.size());
}

TEST_P(ProbeCommandTest, ACorpusRecordedFromTheDialectPassesItsCheck) {
  const Case c = GetParam();
  const fs::path dir = FreshDir(std::string("rec_") + std::to_string(static_cast<int>(c.dialect)) +
                                (std::string(c.engine).rfind("sim:", 0) == 0 ? "_sim" : ""));
  std::string out;
  ASSERT_EQ(RecordFromSim(c.engine, c.dialect, dir, &out), 0) << out;
  EXPECT_NE(out.find("capq probe: recorded "), std::string::npos) << out;
  ExpectCorpus(dir, c);
  // The engine comes from the corpus's MANIFEST.jsonl.
  ASSERT_EQ(Check(dir, c.dialect, &out), 0) << out;
  const size_t n = Manifest(dir).size();
  EXPECT_NE(out.find(std::to_string(n) + " exchanges compared with capq's " + c.engine +
                     " dialect: 0 differences"),
            std::string::npos)
      << out;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Dialects, ProbeCommandTest,
                         ::testing::Values(Case{"sglang", capq::sim::Dialect::kSglang},
                                           Case{"vllm", capq::sim::Dialect::kVllm},
                                           Case{"llamacpp", capq::sim::Dialect::kLlamacpp},
                                           Case{"sim:vllm", capq::sim::Dialect::kVllm}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.engine;
                           for (char& ch : n) ch = ch == ':' ? '_' : ch;
                           return n;
                         });

// Lines of `out` that name `file` ("14-chat-stream-max_tokens.resp: ...").
std::vector<std::string> LinesFor(const std::string& out, const std::string& file) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(file + ":", 0) == 0) lines.push_back(line);
  }
  return lines;
}

TEST(ProbeCheckTest, TheRecordedLlamacppCorpusIsComparedAndItsDifferencesListed) {
  std::string out;
  EXPECT_EQ(Check(kSource + "/tests/data/conformance/llamacpp", capq::sim::Dialect::kLlamacpp, &out,
                  "llamacpp"),
            1)
      << out;
  EXPECT_NE(out.find("94 exchanges compared with capq's llamacpp dialect"), std::string::npos)
      << out;
  // What the recording caught that a fresh, idle simulator with slot actions on cannot show: a
  // server still loading, and one started without --slot-save-path.
  EXPECT_NE(out.find("01-health-loading.resp: status: recorded 503, capq 200\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("94-nss-erase-slot0.resp: status: recorded 501, capq 200\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("note: 97-kill-midstream-sigterm: not compared"), std::string::npos) << out;
  // The exchanges the llamacpp dialect is held to (tests/sim/llamacpp_conformance_test.cc) match.
  for (const char* file :
       {"02-health-ready.resp", "03-v1-models.resp", "04-props.resp", "06-metrics-idle.resp",
        "07-tokenize-add_special-false.resp", "10-apply-template.resp",
        "14-chat-stream-max_tokens.resp", "16-chat-stream-no-stream_options.resp",
        "18-chat-nonstream.resp", "20-load12-stream05.resp", "50-error-invalid-json.resp",
        "51-error-prompt-exceeds-ctx-stream.resp",
        "52-prompt-plus-max_tokens-exceeds-ctx-stream.resp", "adapter"}) {
    EXPECT_TRUE(LinesFor(out, file).empty()) << file << "\n" << out;
  }
}

// Applies `edit` to every HTTP chunk's payload of a chunked answer and frames it again.
std::string EditChunks(const std::string& resp,
                       const std::function<std::string(std::string)>& edit) {
  const size_t head = resp.find("\r\n\r\n") + 4;
  std::string out = resp.substr(0, head);
  for (size_t pos = head;;) {
    const size_t eol = resp.find("\r\n", pos);
    const size_t len = std::stoul(resp.substr(pos, eol - pos), nullptr, 16);
    if (len == 0) break;
    const std::string payload = edit(resp.substr(eol + 2, len));
    char size[32];
    std::snprintf(size, sizeof size, "%zx", payload.size());
    out += std::string(size) + "\r\n" + payload + "\r\n";
    pos = eol + 2 + len + 2;
  }
  return out + "0\r\n\r\n";
}

// Applies `edit` to a Content-Length answer's body and sets its length again.
std::string EditBody(const std::string& resp, const std::function<std::string(std::string)>& edit) {
  const size_t head = resp.find("\r\n\r\n") + 4;
  const std::string body = edit(resp.substr(head));
  return std::regex_replace(resp.substr(0, head), std::regex("Content-Length: \\d+"),
                            "Content-Length: " + std::to_string(body.size())) +
         body;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

TEST(ProbeCheckTest, AnEditedRecordingShowsItsEditAndFails) {
  const fs::path dir = FreshDir("edited");
  std::string out;
  ASSERT_EQ(RecordFromSim("sglang", capq::sim::Dialect::kSglang, dir, &out), 0) << out;
  // A key renamed in a JSON answer, and a null made a 0 in every chunk of a stream.
  Write(dir / "02-v1-models.resp", EditBody(Read(dir / "02-v1-models.resp"), [](std::string b) {
          return ReplaceAll(b, "\"owned_by\":", "\"owner\":");
        }));
  Write(dir / "21-chat-c1.resp", EditChunks(Read(dir / "21-chat-c1.resp"), [](std::string p) {
          return ReplaceAll(p, "\"logprobs\":null", "\"logprobs\":0");
        }));
  ASSERT_EQ(Check(dir, capq::sim::Dialect::kSglang, &out), 1) << out;
  EXPECT_EQ(LinesFor(out, "02-v1-models.resp"),
            (std::vector<std::string>{
                "02-v1-models.resp: $.data[].owner: recorded string, capq absent",
                "02-v1-models.resp: $.data[].owned_by: recorded absent, capq string"}))
      << out;
  const std::vector<std::string> chat = LinesFor(out, "21-chat-c1.resp");
  EXPECT_FALSE(chat.empty()) << out;
  for (const std::string& line : chat) {
    EXPECT_TRUE(std::regex_match(
        line,
        std::regex(
            R"(21-chat-c1\.resp: event [RCF] \$\.choices\[\]\.logprobs: recorded number, capq null)")))
        << line;
  }
  // Nothing else differs.
  EXPECT_NE(out.find(": " + std::to_string(2 + chat.size()) + " differences\n"), std::string::npos)
      << out;
  fs::remove_all(dir);
}

// llama.cpp's dialect claims its chunks' key order; SGLang's does not.
// A live llama-server of a later build (b10587, recorded by capq probe: the corpus's README) writes
// meta.vocab_type as a bool and has chat_template_caps.supports_reasoning_effort. The check starts
// the dialect as the build the corpus names, so the corpus passes; the same answers named as
// b9749 are held to b9749's shapes and show both differences.
TEST(ProbeCheckTest, ALaterLlamacppBuildIsCheckedAgainstTheShapesOfItsBuild) {
  const fs::path recorded = kSource + "/tests/data/conformance/llamacpp_b10587";
  std::string out;
  EXPECT_EQ(Check(recorded, capq::sim::Dialect::kLlamacpp, &out), 0) << out;
  EXPECT_NE(out.find("32 exchanges compared with capq's llamacpp dialect: 0 differences"),
            std::string::npos)
      << out;
  const fs::path dir = FreshDir("b9749-named");
  fs::copy(recorded, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const std::string props = Read(dir / "03-props.resp");
  Write(dir / "03-props.resp", EditBody(props, [](std::string body) {
          return ReplaceAll(body, "\"build_info\":\"b10587-", "\"build_info\":\"b9749-");
        }));
  EXPECT_EQ(Check(dir, capq::sim::Dialect::kLlamacpp, &out), 1) << out;
  EXPECT_NE(out.find("02-v1-models.resp: $.data[].meta.vocab_type: recorded bool, capq number"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("03-props.resp: $.chat_template_caps.supports_reasoning_effort: recorded "
                     "bool, capq absent"),
            std::string::npos)
      << out;
}

TEST(ProbeCheckTest, KeyOrderIsComparedWhereTheDialectClaimsIt) {
  for (const auto& [engine, d, differs] :
       {std::tuple{"llamacpp", capq::sim::Dialect::kLlamacpp, true},
        std::tuple{"sglang", capq::sim::Dialect::kSglang, false}}) {
    const fs::path dir = FreshDir(std::string("order_") + engine);
    std::string out;
    ASSERT_EQ(RecordFromSim(engine, d, dir, &out), 0) << out;
    // "object" moved to the front of every chunk: the same bytes, in another order.
    Write(dir / "22-chat-c1.resp", EditChunks(Read(dir / "22-chat-c1.resp"), [](std::string p) {
            const std::string obj = ",\"object\":\"chat.completion.chunk\"";
            std::string out_text;
            std::istringstream in(p);
            for (std::string line; std::getline(in, line);) {
              if (line.rfind("data: {", 0) == 0 && line.find(obj) != std::string::npos) {
                line = ReplaceAll(line, obj, "");
                line.insert(7, obj.substr(1) + ",");
              }
              out_text += line + "\n";
            }
            return out_text;
          }));
    EXPECT_EQ(Check(dir, d, &out), differs ? 1 : 0) << engine << "\n" << out;
    EXPECT_EQ(
        out.find("22-chat-c1.resp: event C $ key order: recorded object,") != std::string::npos,
        differs)
        << engine << "\n"
        << out;
    fs::remove_all(dir);
  }
}

TEST(ProbeCheckTest, TheApiKeyIsSentButWrittenNowhere) {
  const fs::path dir = FreshDir("key");
  setenv("CAPQ_API_KEY", "sk-probe-secret-1234", 1);
  std::string out;
  const int rc = RecordFromSim("vllm", capq::sim::Dialect::kVllm, dir, &out);
  unsetenv("CAPQ_API_KEY");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(Read(dir / "01-health.req").find("Authorization: Bearer <redacted>\r\n"),
            std::string::npos);
  for (const auto& f : fs::directory_iterator(dir)) {
    EXPECT_EQ(Read(f.path()).find("sk-probe-secret"), std::string::npos) << f.path();
  }
  fs::remove_all(dir);
}

}  // namespace
