#include "experiments/lab/lab_server.h"

#include <string>

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

}  // namespace

void AddLabRoutes(httplib::Server& server, LabRunner& runner, int max_workers) {
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
  get("/api/collectives", [](const LabParams&) { return CollectivesResponse(); });
  get("/api/trace", &TraceResponse);
  get("/api/memory", &MemoryResponse);
  get("/api/model", &ModelResponse);
  get("/api/run", [&runner](const LabParams& p) { return RunStatusResponse(p, runner); });
  get("/api/run.jsonl", [&runner](const LabParams& p) { return RunRowsResponse(p, runner); });
  get("/api/results", [&runner](const LabParams&) { return ResultsResponse(runner); });
  server.Post("/api/run", [&runner, max_workers](const httplib::Request& request,
                                                 httplib::Response& out) {
    Send(SubmitRunResponse(ParamsOf(request), max_workers, runner), out);
  });
}

}  // namespace testbed
