#!/usr/bin/env python3
"""Writes the SGLang and vLLM exchange fixtures (sglang/, vllm/) in the llama.cpp corpus format.

No live SGLang or vLLM server is available here, so these exchanges are written from the servers'
source: every key, key order, null and separator follows the serializer the server uses for that
answer, and the HTTP framing follows uvicorn (status line, `date` and `server` first, then the
application's headers; a StreamingResponse without Content-Length is sent chunked, one HTTP chunk
per yielded string, ending in `0\\r\\n\\r\\n`). Each folder's README.md cites the source lines.
Numbers (token ids, counts, timestamps, ids) are illustrative: they are consistent with each other
but were not produced by a model.

Run from anywhere: python3 tests/data/conformance/write_source_fixtures.py
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DATE = "Tue, 01 Dec 2026 09:00:00 GMT"


# ---- serializers -------------------------------------------------------------------------------


def compact(obj):
    """starlette JSONResponse, ORJSONResponse, pydantic model_dump_json and msgspec all write
    compact JSON with non-ASCII text unescaped."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def spaced(obj):
    """Plain json.dumps: the servers' streaming error frames use it (", " and ": ")."""
    return json.dumps(obj)


# ---- HTTP framing ------------------------------------------------------------------------------

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}


def request(host, method, path, body=None):
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}", "User-Agent: conformance-fixture/1.0",
            "Accept: */*"]
    data = b""
    if body is not None or method == "POST":
        data = json.dumps(body).encode() if body is not None else b""
        head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def response(status, body=b"", content_type=None, chunks=None):
    """A uvicorn response. `chunks` (a list of str) makes a chunked StreamingResponse."""
    head = [f"HTTP/1.1 {status} {REASONS[status]}", f"date: {DATE}", "server: uvicorn"]
    if chunks is None:
        if isinstance(body, str):
            body = body.encode()
        head.append(f"content-length: {len(body)}")
        if content_type:
            head.append(f"content-type: {content_type}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body
    head.append(f"content-type: {content_type}")
    head.append("Transfer-Encoding: chunked")
    out = ("\r\n".join(head) + "\r\n\r\n").encode()
    for c in chunks:
        b = c.encode()
        out += b"%x\r\n" % len(b) + b + b"\r\n"
    return out + b"0\r\n\r\n"


def write(folder, name, req, resp):
    d = os.path.join(HERE, folder)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name + ".req"), "wb") as f:
        f.write(req)
    with open(os.path.join(d, name + ".resp"), "wb") as f:
        f.write(resp)


def sse(obj_or_text):
    return "data: " + (obj_or_text if isinstance(obj_or_text, str) else compact(obj_or_text)) + "\n\n"


JSON = "application/json"
EVENT_STREAM = "text/event-stream; charset=utf-8"

# ---- SGLang (main 8905cbd42) -------------------------------------------------------------------

SGL_HOST = "127.0.0.1:30000"
SGL_MODEL = "qwen3-8b"
SGL_PATH = "/models/Qwen3-8B"
SGL_CTX = 40960
SGL_CHAT = [{"role": "user", "content": "Say hi"}]
# The template's tokens around the content, then the content's own tokens.
SGL_CONTENT_IDS = [25699, 15588]
SGL_CHAT_IDS = [151644, 872, 198] + SGL_CONTENT_IDS + [151645, 198, 151644, 77091, 198]


def sglang():
    w = lambda *a: write("sglang", *a)
    w("01-health-starting", request(SGL_HOST, "GET", "/health"), response(503))
    w("02-health-ready", request(SGL_HOST, "GET", "/health"), response(200))
    models = {"object": "list", "data": [{
        "id": SGL_MODEL, "object": "model", "created": 1796115600, "owned_by": "sglang",
        "root": SGL_MODEL, "parent": None, "max_model_len": SGL_CTX}]}
    w("03-v1-models", request(SGL_HOST, "GET", "/v1/models"), response(200, compact(models), JSON))

    # A subset of ServerArgs (dataclasses.asdict gives every field), as launched with
    # --max-running-requests 64 --chunked-prefill-size 8192 --speculative-algorithm EAGLE
    # --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
    # --enable-cache-report --enable-metrics; context_length stays null (not given).
    args = {
        "model_path": SGL_PATH, "tokenizer_path": SGL_PATH, "tokenizer_mode": "auto",
        "skip_tokenizer_init": False, "load_format": "auto", "trust_remote_code": False,
        "context_length": None, "is_embedding": False, "revision": None, "dtype": "auto",
        "quantization": None, "kv_cache_dtype": "auto", "mem_fraction_static": 0.835,
        "max_running_requests": 64, "max_queued_requests": None, "max_total_tokens": None,
        "chunked_prefill_size": 8192, "enable_dynamic_chunking": False,
        "max_prefill_tokens": 16384, "prefill_max_requests": None, "schedule_policy": "fcfs",
        "schedule_conservativeness": 1.0, "page_size": 1, "disable_radix_cache": False,
        "enable_mixed_chunk": False, "tp_size": 1, "pp_size": 1, "dp_size": 1,
        "device": "cuda", "random_seed": 42, "host": "127.0.0.1", "port": 30000,
        "served_model_name": SGL_MODEL, "weight_version": "default",
        "enable_cache_report": True, "stream_response_default_include_usage": False,
        "incremental_streaming_output": False, "enable_metrics": True,
        "attention_backend": "fa3", "speculative_algorithm": "EAGLE",
        "speculative_draft_model_path": "/models/Qwen3-8B-EAGLE3", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "ep_size": 1,
        "max_mamba_cache_size": None,
    }
    internal = dict(args)
    internal.update({
        "last_gen_throughput": 0.0,
        "memory_usage": {"weight": 15.27, "kvcache": 13.18, "token_capacity": 96000,
                         "graph": 0.73},
        "effective_max_running_requests_per_dp": 48,
    })
    info = dict(args)
    info.update({"status": "ready", "max_total_num_tokens": 96000, "max_req_input_len": 40954})
    info.update({"internal_states": [internal], "version": "0.5.15.post1", "kv_events": None})
    w("04-server-info", request(SGL_HOST, "GET", "/server_info"),
      response(200, compact(info), JSON))

    flushed = ("Cache flushed.\nPlease check backend logs for more details. (When there are "
               "running or waiting requests, the operation will not be performed.)\n")
    w("05-flush-cache-busy", request(SGL_HOST, "POST", "/flush_cache"),
      response(400, "Flush cache failed.\n"))
    w("06-flush-cache-ok", request(SGL_HOST, "POST", "/flush_cache"), response(200, flushed))
    # Before #21490 (2026-03-26) a busy flush answered 400 with the success text.
    w("07-flush-cache-busy-before-21490", request(SGL_HOST, "POST", "/flush_cache"),
      response(400, flushed))

    tok = {"tokens": SGL_CONTENT_IDS, "count": len(SGL_CONTENT_IDS), "max_model_len": 131072}
    w("08-tokenize-prompt",
      request(SGL_HOST, "POST", "/tokenize", {"prompt": "Say hi", "add_special_tokens": False}),
      response(200, compact(tok), JSON))
    tok_chat = {"tokens": SGL_CHAT_IDS, "count": len(SGL_CHAT_IDS), "max_model_len": 131072}
    w("09-v1-tokenize-messages",
      request(SGL_HOST, "POST", "/v1/tokenize", {"model": SGL_MODEL, "messages": SGL_CHAT}),
      response(200, compact(tok_chat), JSON))

    rid = "3f2c1a9be0d84c5fa6b7d1e2c3f4a5b6"

    def chunk(delta, finish=None, created=1796115601):
        return sse({"id": rid, "object": "chat.completion.chunk", "created": created,
                    "model": SGL_MODEL, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                     "finish_reason": finish,
                                                     "matched_stop": None}]})

    def usage(prompt, completion, cached):
        details = {"cached_tokens": cached} if cached else None
        return sse({"id": rid, "object": "chat.completion.chunk", "created": 1796115601,
                    "model": SGL_MODEL, "choices": [],
                    "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                              "completion_tokens": completion, "prompt_tokens_details": details,
                              "reasoning_tokens": 0}})

    body = {"model": SGL_MODEL, "messages": SGL_CHAT, "max_tokens": 4, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    words = ["Hello", ",", " world", "!"]
    stream = [chunk({"reasoning_content": None, "role": "assistant", "content": ""})]
    stream += [chunk({"reasoning_content": None, "content": t}) for t in words]
    stream += [chunk({"reasoning_content": None}, "length"), usage(len(SGL_CHAT_IDS), 4, 8),
               "data: [DONE]\n\n"]
    w("10-chat-stream-usage", request(SGL_HOST, "POST", "/v1/chat/completions", body),
      response(200, content_type=EVENT_STREAM, chunks=stream))

    # A running-timeout abort after two tokens: the error frame, then (include_usage) the usage
    # chunk for what was generated, then [DONE]. No finish chunk.
    body_long = dict(body, max_tokens=2048)
    err = {"error": {"object": "error", "message": "Request running timeout reached.",
                     "type": "SERVICE_UNAVAILABLE", "param": None, "code": 503}}
    stream = [chunk({"reasoning_content": None, "role": "assistant", "content": ""})]
    stream += [chunk({"reasoning_content": None, "content": t}) for t in words[:2]]
    stream += ["data: " + spaced(err) + "\n\n", usage(len(SGL_CHAT_IDS), 2, 0),
               "data: [DONE]\n\n"]
    w("11-chat-stream-error-midstream",
      request(SGL_HOST, "POST", "/v1/chat/completions", body_long),
      response(200, content_type=EVENT_STREAM, chunks=stream))

    # Errors raised before the first chunk are a plain JSON 400 (create_error_response).
    over = {"object": "error",
            "message": f"The input (41000 tokens) is longer than the model's context length "
                       f"({SGL_CTX} tokens).",
            "type": "BadRequestError", "param": None, "code": 400}
    w("12-chat-stream-over-context-400",
      request(SGL_HOST, "POST", "/v1/chat/completions",
              dict(body, messages=[{"role": "user", "content": "<41000 tokens of text>"}])),
      response(400, compact(over), JSON))


# ---- vLLM (v0.16.0) ----------------------------------------------------------------------------

VLLM_HOST = "127.0.0.1:8000"
VLLM_MODEL = "qwen3-8b"
VLLM_PATH = "/models/Qwen3-8B"
VLLM_CTX = 32768


def vllm():
    w = lambda *a: write("vllm", *a)
    w("01-health-ready", request(VLLM_HOST, "GET", "/health"), response(200))
    w("02-health-engine-dead", request(VLLM_HOST, "GET", "/health"), response(503))
    perm = {"id": "modelperm-9c1f3b7e2d4a4e0b8f6a5c3d2e1f0a9b", "object": "model_permission",
            "created": 1796115600, "allow_create_engine": False, "allow_sampling": True,
            "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
            "allow_fine_tuning": False, "organization": "*", "group": None,
            "is_blocking": False}
    models = {"object": "list", "data": [{
        "id": VLLM_MODEL, "object": "model", "created": 1796115600, "owned_by": "vllm",
        "root": VLLM_PATH, "parent": None, "max_model_len": VLLM_CTX, "permission": [perm]}]}
    w("03-v1-models", request(VLLM_HOST, "GET", "/v1/models"), response(200, compact(models), JSON))
    w("04-version", request(VLLM_HOST, "GET", "/version"),
      response(200, compact({"version": "0.16.0"}), JSON))

    ids = [25699, 15588]
    chat_ids = [151644, 872, 198] + ids + [151645, 198, 151644, 77091, 198]
    w("05-tokenize-prompt",
      request(VLLM_HOST, "POST", "/tokenize", {"prompt": "Say hi", "add_special_tokens": False}),
      response(200, compact({"count": len(ids), "max_model_len": VLLM_CTX, "tokens": ids,
                             "token_strs": None}), JSON))
    w("06-tokenize-messages",
      request(VLLM_HOST, "POST", "/tokenize",
              {"model": VLLM_MODEL, "messages": [{"role": "user", "content": "Say hi"}],
               "add_generation_prompt": True}),
      response(200, compact({"count": len(chat_ids), "max_model_len": VLLM_CTX,
                             "tokens": chat_ids, "token_strs": None}), JSON))

    w("07-reset-prefix-cache", request(VLLM_HOST, "POST", "/reset_prefix_cache"), response(200))
    # Without VLLM_SERVER_DEV_MODE=1 the route is not mounted: FastAPI's default 404.
    w("08-reset-prefix-cache-no-dev-mode", request(VLLM_HOST, "POST", "/reset_prefix_cache"),
      response(404, compact({"detail": "Not Found"}), JSON))
    # Newer builds answer {"success": bool}, still with 200 when the reset failed.
    w("09-reset-prefix-cache-newer-busy", request(VLLM_HOST, "POST", "/reset_prefix_cache"),
      response(200, compact({"success": False}), JSON))

    lab = 'engine="0",model_name="qwen3-8b"'
    cache_labels = {
        "block_size": "16", "cache_dtype": "auto", "calculate_kv_scales": "False",
        "cpu_kvcache_space_bytes": "None", "cpu_offload_gb": "0", "enable_prefix_caching": "True",
        "engine": "0", "gpu_memory_utilization": "0.9", "is_attention_free": "False",
        "kv_cache_memory_bytes": "None", "kv_offloading_backend": "native",
        "kv_offloading_size": "None", "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None", "mamba_cache_dtype": "auto", "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None", "mamba_ssm_cache_dtype": "auto",
        "num_cpu_blocks": "0", "num_gpu_blocks": "2275", "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256", "sliding_window": "None", "swap_space": "4",
    }
    info_labels = ",".join(f'{k}="{v}"' for k, v in sorted(cache_labels.items()))
    metrics = "".join([
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n",
        "# TYPE vllm:num_requests_running gauge\n",
        f"vllm:num_requests_running{{{lab}}} 3.0\n",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n",
        "# TYPE vllm:num_requests_waiting gauge\n",
        f"vllm:num_requests_waiting{{{lab}}} 2.0\n",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n",
        "# TYPE vllm:kv_cache_usage_perc gauge\n",
        f"vllm:kv_cache_usage_perc{{{lab}}} 0.4375\n",
        "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of "
        "queried tokens.\n",
        "# TYPE vllm:prefix_cache_queries_total counter\n",
        f"vllm:prefix_cache_queries_total{{{lab}}} 12288.0\n",
        "# HELP vllm:prefix_cache_queries_created Prefix cache queries, in terms of number of "
        "queried tokens.\n",
        "# TYPE vllm:prefix_cache_queries_created gauge\n",
        f"vllm:prefix_cache_queries_created{{{lab}}} 1.7961156e+09\n",
        "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached "
        "tokens.\n",
        "# TYPE vllm:prefix_cache_hits_total counter\n",
        f"vllm:prefix_cache_hits_total{{{lab}}} 4096.0\n",
        "# HELP vllm:prefix_cache_hits_created Prefix cache hits, in terms of number of cached "
        "tokens.\n",
        "# TYPE vllm:prefix_cache_hits_created gauge\n",
        f"vllm:prefix_cache_hits_created{{{lab}}} 1.7961156e+09\n",
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n",
        "# TYPE vllm:cache_config_info gauge\n",
        f"vllm:cache_config_info{{{info_labels}}} 1.0\n",
    ])
    w("10-metrics", request(VLLM_HOST, "GET", "/metrics"),
      response(200, metrics, "text/plain; version=0.0.4; charset=utf-8"))

    # Dev mode only; trimmed to the parts that report limits (the real answer carries every
    # config field, plus vllm_env and system_env in full).
    server_info = {
        "vllm_config": {
            "model_config": {"model": VLLM_PATH, "served_model_name": VLLM_MODEL,
                             "max_model_len": VLLM_CTX, "dtype": "bfloat16"},
            "cache_config": {"block_size": 16, "gpu_memory_utilization": 0.9,
                             "enable_prefix_caching": True, "num_gpu_blocks": 2275,
                             "num_cpu_blocks": 0},
            "scheduler_config": {"max_num_seqs": 256, "max_num_batched_tokens": 8192,
                                 "enable_chunked_prefill": True, "policy": "fcfs"},
            "parallel_config": {"tensor_parallel_size": 1, "pipeline_parallel_size": 1,
                                "data_parallel_size": 1},
            "speculative_config": None,
        },
        "vllm_env": {"VLLM_SERVER_DEV_MODE": True},
        "system_env": {"torch_version": "2.9.1+cu129", "cuda_runtime_version": "12.9"},
    }
    w("11-server-info-json-dev-mode",
      request(VLLM_HOST, "GET", "/server_info?config_format=json"),
      response(200, compact(server_info), JSON))

    rid = "chatcmpl-5b0e8c2f7a6d4b1e9c3a2f1e0d9c8b7a"

    def chunk(choice, extra=None):
        c = {"id": rid, "object": "chat.completion.chunk", "created": 1796115601,
             "model": VLLM_MODEL, "choices": [choice]}
        c.update(extra or {})
        return sse(c)

    body = {"model": VLLM_MODEL, "messages": [{"role": "user", "content": "Say hi"}],
            "max_tokens": 4, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    words = ["Hello", ",", " world", "!"]
    role = chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                  "finish_reason": None}, {"prompt_token_ids": None})
    tokens = [chunk({"index": 0, "delta": {"content": t}, "logprobs": None,
                     "finish_reason": None, "token_ids": None}) for t in words[:-1]]
    # The last token's text rides on the finish chunk.
    last = chunk({"index": 0, "delta": {"content": words[-1]}, "logprobs": None,
                  "finish_reason": "length", "stop_reason": None, "token_ids": None})
    usage = sse({"id": rid, "object": "chat.completion.chunk", "created": 1796115601,
                 "model": VLLM_MODEL, "choices": [],
                 "usage": {"prompt_tokens": len(chat_ids), "total_tokens": len(chat_ids) + 4,
                           "completion_tokens": 4}})
    w("12-chat-stream-usage", request(VLLM_HOST, "POST", "/v1/chat/completions", body),
      response(200, content_type=EVENT_STREAM,
               chunks=[role] + tokens + [last, usage, "data: [DONE]\n\n"]))

    # finish_reason "error" from the engine raises GenerationError: the error frame, no usage
    # chunk, then [DONE].
    err = {"error": {"message": "Internal server error", "type": "InternalServerError",
                     "param": None, "code": 500}}
    w("13-chat-stream-error-midstream",
      request(VLLM_HOST, "POST", "/v1/chat/completions", dict(body, max_tokens=2048)),
      response(200, content_type=EVENT_STREAM,
               chunks=[role] + tokens[:2] + ["data: " + spaced(err) + "\n\n",
                                             "data: [DONE]\n\n"]))

    over = {"error": {"message": f"This model's maximum context length is {VLLM_CTX} tokens. "
                                 f"However, your request has 33000 input tokens. Please reduce "
                                 f"the length of the input messages.",
                      "type": "BadRequestError", "param": "input_tokens", "code": 400}}
    w("14-chat-stream-over-context-400",
      request(VLLM_HOST, "POST", "/v1/chat/completions",
              dict(body, messages=[{"role": "user", "content": "<33000 tokens of text>"}])),
      response(400, compact(over), JSON))


if __name__ == "__main__":
    sglang()
    vllm()
