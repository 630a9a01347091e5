#include "experiments/lab/lab_server.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "experiments/lab/lab_api.h"
#include "experiments/lab/lab_assets.h"

namespace testbed {
namespace {

void Send(const LabResponse& response, httplib::Response& out) {
  out.status = response.status;
  out.set_content(response.body, response.content_type.c_str());
  // The page polls: never a stale answer from a cache.
  out.set_header("Cache-Control", "no-store");
}

LabParams ParamsOf(const httplib::Request& request) {
  return LabParams(request.params.begin(), request.params.end());
}

// "text/html; charset=utf-8" and the like, from the name's extension.
std::string_view ContentTypeOf(std::string_view name) {
  const auto ends_with = [&](std::string_view suffix) { return name.ends_with(suffix); };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// Compares in time independent of where the first difference is, so the
// answer's timing does not give the token away byte by byte.
bool SameToken(const std::string& given, const std::string& expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    difference |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return difference == 0;
}

void RequireToken(httplib::Server& server, const std::string& token) {
  server.set_pre_routing_handler([token](const httplib::Request& request,
                                         httplib::Response& out) {
    if (!request.path.starts_with("/api/")) return httplib::Server::HandlerResponse::Unhandled;
    const std::string given = request.has_header("X-Lab-Token")
                                  ? request.get_header_value("X-Lab-Token")
                                  : request.get_param_value("token");
    if (SameToken(given, token)) return httplib::Server::HandlerResponse::Unhandled;
    Send({.status = 401, .content_type = "text/plain",
          .body = "this lab needs its token: open the address testbed lab printed\n"},
         out);
    return httplib::Server::HandlerResponse::Handled;
  });
}

}  // namespace

void ListenAlone(httplib::Server& server) {
  server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
}

void LimitClients(httplib::Server& server) {
  server.new_task_queue = [] { return new httplib::ThreadPool(kLabServerThreads); };
  const auto timeout = static_cast<time_t>(kLabClientTimeout.count());
  server.set_read_timeout(timeout);
  server.set_write_timeout(timeout);
  server.set_keep_alive_timeout(static_cast<time_t>(kLabKeepAlive.count()));
  server.set_payload_max_length(kMaxLabRequestBytes);
}

std::string LabLimitsText() {
  return absl::StrCat(
      "Limits: ", kMaxQueuedLabRuns, " runs may wait behind the one running (more: 429); ",
      kLabServerThreads, " connections are served at once; a client silent for ",
      kLabClientTimeout.count(), " s mid-request, or idle for ", kLabKeepAlive.count(),
      " s between requests, is closed; request bodies over ", kMaxLabRequestBytes / 1024,
      " KiB are refused (413).");
}

void AddLabRoutes(httplib::Server& server, LabRunner& runner, const LabInfo& info,
                  const std::string& token) {
  const int max_workers = info.max_workers;
  if (!token.empty()) RequireToken(server, token);
  for (const LabAsset& asset : LabAssets()) {
    const std::string path = asset.name == "index.html" ? "/" : "/" + std::string(asset.name);
    server.Get(path, [asset](const httplib::Request&, httplib::Response& out) {
      out.set_content(asset.content.data(), asset.content.size(),
                      std::string(ContentTypeOf(asset.name)).c_str());
    });
  }
  const auto get = [&server](const std::string& path, auto handler) {
    server.Get(path, [handler](const httplib::Request& request, httplib::Response& out) {
      Send(handler(ParamsOf(request)), out);
    });
  };
  get("/api/lab", [info](const LabParams&) { return LabInfoResponse(info); });
  get("/api/collectives", [](const LabParams&) { return CollectivesResponse(); });
  get("/api/trace", &TraceResponse);
  get("/api/memory", &MemoryResponse);
  get("/api/model", &ModelResponse);
  get("/api/run", [&runner](const LabParams& p) { return RunStatusResponse(p, runner); });
  get("/api/run.jsonl", [&runner](const LabParams& p) { return RunRowsResponse(p, runner); });
  get("/api/results", [&runner](const LabParams&) { return ResultsResponse(runner); });
  get("/api/zero-traffic",
      [&runner](const LabParams& p) { return ZeroTrafficResponse(p, runner); });
  server.Post("/api/run", [&runner, max_workers](const httplib::Request& request,
                                                 httplib::Response& out) {
    Send(SubmitRunResponse(ParamsOf(request), max_workers, runner), out);
  });
  server.Post("/api/zero-traffic", [&runner, max_workers](const httplib::Request& request,
                                                          httplib::Response& out) {
    Send(SubmitZeroTrafficResponse(ParamsOf(request), max_workers, runner), out);
  });
}

}  // namespace testbed
