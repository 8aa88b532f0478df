// The evidence can be trusted: a tampered file is reported, the API key reaches the server and
// nothing else, and TLS verification is on unless an explicit, recorded flag turns it off.
#include <gtest/gtest.h>

#include "process_util.h"

namespace capq::reliability {
namespace {

std::vector<std::string> FastTrial(const std::string& url, const std::string& out,
                                   const std::vector<std::string>& extra = {}) {
  return TrialArgv("rel_fast.yaml", url, out, extra);
}

TEST(Evidence, OneChangedByteInMetricsJsonIsReportedByValidate) {
  const std::string dir = Scratch("tamper");
  SimProcess sim = StartSim(dir, 100);
  ASSERT_FALSE(sim.url.empty());
  RunResult t = RunProcess(FastTrial(sim.url, dir + "/trial"), dir + "/trial", 90);
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  RunResult before = RunProcess({Exe(), "validate", dir + "/trial"}, dir + "/validate-before", 60);
  ASSERT_EQ(before.exit_code, 0) << "the untouched directory must validate\n" << before.out;

  const std::string path = dir + "/trial/metrics.json";
  std::string text = ReadFile(path);
  // Change one digit (a figure, not the JSON shape): the file still parses.
  size_t at = text.find_first_of("123456789", text.find("\"p95\""));
  ASSERT_NE(at, std::string::npos) << text.substr(0, 400);
  text[at] = text[at] == '9' ? '1' : static_cast<char>(text[at] + 1);
  WriteFile(path, text);

  RunResult after = RunProcess({Exe(), "validate", dir + "/trial"}, dir + "/validate-after", 60);
  EXPECT_NE(after.exit_code, 0) << after.out;
  EXPECT_TRUE(Contains(after.out, "checksums: FAILED")) << after.out;
  EXPECT_TRUE(Contains(after.out + after.err, "metrics.json")) << "the tampered file is named\n"
                                                               << after.out << after.err;
  EXPECT_FALSE(Contains(after.out + after.err, "raw.jsonl:")) << "only metrics.json changed";
}

// Every file under `dirs` plus the given texts: the marker appears nowhere.
void ExpectNoMarker(const std::string& marker, const std::vector<std::string>& dirs,
                    const std::vector<std::pair<std::string, std::string>>& texts) {
  int files = 0;
  for (const auto& d : dirs) {
    for (const auto& f : FilesUnder(d)) {
      EXPECT_FALSE(Contains(ReadFile(f.string()), marker)) << "the API key leaked into " << f;
      ++files;
    }
  }
  EXPECT_GE(files, 1);
  for (const auto& [name, text] : texts) {
    EXPECT_FALSE(Contains(text, marker)) << "the API key leaked into " << name;
  }
}

TEST(Evidence, ApiKeyReachesTheServerAndNoArtifactLogOrMessage) {
  const std::string dir = Scratch("api-key");
  const std::string marker = RandomMarker("capqkey");
  SimProcess sim = StartSim(dir, 100);
  ASSERT_FALSE(sim.url.empty());
  const std::vector<std::pair<std::string, std::string>> env = {{"CAPQ_API_KEY", marker},
                                                                {"CAPQ_LOG_LEVEL", "debug"}};
  std::vector<std::pair<std::string, std::string>> outputs;
  std::string sent;
  {
    RecordingProxy proxy(sim.port);
    RunResult t = RunProcess(FastTrial(proxy.url(), dir + "/trial"), dir + "/trial", 90, env);
    EXPECT_EQ(t.exit_code, 0) << t.out << t.err;
    outputs.push_back({"trial stdout", t.out});
    outputs.push_back({"trial stderr", t.err});
    EXPECT_TRUE(Contains(t.err, "[debug]") || Contains(t.err, "debug"))
        << "CAPQ_LOG_LEVEL=debug should produce debug output; stderr:\n"
        << t.err.substr(0, 2000);

    RunResult q =
        RunProcess({Exe(), "qualify", DataPath("rows/rel_fast.yaml"), "--url", proxy.url(), "--out",
                    dir + "/qualify", "--max-concurrency", "2", "--trials", "1"},
                   dir + "/qualify", 240, env);
    EXPECT_FALSE(q.timed_out);
    outputs.push_back({"qualify stdout", q.out});
    outputs.push_back({"qualify stderr", q.err});
    sent = proxy.client_bytes();
  }
  // An error path: the message names the server, not the key.
  RunResult refused = RunProcess(FastTrial("http://127.0.0.1:" + std::to_string(FreePort()),
                                           dir + "/refused", {"--setup-timeout", "2"}),
                                 dir + "/refused", 60, env);
  EXPECT_EQ(refused.exit_code, 3);
  outputs.push_back({"refused stdout", refused.out});
  outputs.push_back({"refused stderr", refused.err});

  ExpectNoMarker(marker, {dir + "/trial", dir + "/qualify", dir + "/refused"}, outputs);

  // The configured server did receive it, as a bearer token, on every chat request.
  const std::string header = "Authorization: Bearer " + marker;
  size_t chats = 0, with_key = 0;
  for (size_t pos = sent.find("POST /v1/chat/completions"); pos != std::string::npos;
       pos = sent.find("POST /v1/chat/completions", pos + 1)) {
    ++chats;
    size_t head_end = sent.find("\r\n\r\n", pos);
    if (head_end != std::string::npos &&
        sent.substr(pos, head_end - pos).find(header) != std::string::npos) {
      ++with_key;
    }
  }
  EXPECT_GE(chats, 22u) << "the trial's 22 chat requests went through the proxy";
  EXPECT_EQ(with_key, chats) << "every chat request carries the key";
}

bool HaveOpenssl() { return fs::exists("/usr/bin/openssl"); }

TEST(Evidence, TlsVerificationIsOnByDefaultAndInsecureIsRecorded) {
  if (!HaveOpenssl()) GTEST_SKIP() << "openssl command not installed: no TLS server to test with";
  const std::string dir = Scratch("tls");
  RunResult gen = RunProcess({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                              "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "1",
                              "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"},
                             dir + "/gen", 60);
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const int port = FreePort();
  auto server =
      Child::Start({"/usr/bin/openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port),
                    "-cert", dir + "/cert.pem", "-key", dir + "/key.pem", "-www"},
                   dir + "/s_server.out", dir + "/s_server.err");
  ASSERT_TRUE(server);
  const double end = WallS() + 20;
  bool up = false;
  while (!up && WallS() < end) {
    up = Contains(server->Out(), "ACCEPT");
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(up) << server->Out() << server->Err();
  const std::string url = "https://127.0.0.1:" + std::to_string(port);

  // A self-signed certificate: refused by default, before anything is sent.
  RunResult strict =
      RunProcess(FastTrial(url, dir + "/strict", {"--setup-timeout", "3"}), dir + "/strict", 60);
  EXPECT_EQ(strict.exit_code, 3) << strict.out << strict.err;
  EXPECT_TRUE(Contains(strict.out, "certificate")) << strict.out;
  nlohmann::json sv = ReadJson(dir + "/strict/verdict.json");
  EXPECT_FALSE(sv.value("insecure_tls", false));

  // With --insecure the handshake passes (this is no LLM server, so the trial still cannot run)
  // and the choice is in the trial's metadata.
  RunResult loose =
      RunProcess(FastTrial(url, dir + "/insecure", {"--setup-timeout", "3", "--insecure"}),
                 dir + "/insecure", 60);
  EXPECT_EQ(loose.exit_code, 3) << loose.out << loose.err;
  EXPECT_FALSE(Contains(loose.out, "certificate")) << "verification was off: " << loose.out;
  nlohmann::json lv = ReadJson(dir + "/insecure/verdict.json");
  EXPECT_EQ(lv.value("insecure_tls", false), true) << lv.dump(1);
  nlohmann::json id = ReadJson(dir + "/insecure/identity.json");
  EXPECT_TRUE(Contains(id.dump(), "\"insecure_tls\":true")) << id.dump(1);
}

}  // namespace
}  // namespace capq::reliability
