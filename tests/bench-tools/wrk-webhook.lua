-- wrk script of the `bench` binary's ingest section: every request posts
-- the same signed webhook body with a delivery id of its own
-- (PREFIX-THREAD-N), so a durable inbox stores each one instead of
-- answering it as a duplicate. At the end it prints one JSON line with
-- the figures the bench reads.
--
-- Environment: BENCH_BODY (a file holding the body), BENCH_SIGNATURE (its
-- `sha256=…` signature), BENCH_EVENT, BENCH_PREFIX.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_number", #threads)
end

function init(args)
  local file = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
  wrk.body = file:read("*a")
  file:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-GitHub-Event"] = os.getenv("BENCH_EVENT")
  wrk.headers["X-Hub-Signature-256"] = os.getenv("BENCH_SIGNATURE")
  prefix = os.getenv("BENCH_PREFIX") .. "-" .. thread_number .. "-"
  sent = 0
end

function request()
  sent = sent + 1
  wrk.headers["X-GitHub-Delivery"] = prefix .. sent
  return wrk.format()
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"failed":%d,"p50_us":%d,"p99_us":%d,"p999_us":%d}\n',
    summary.requests, summary.duration,
    errors.connect + errors.read + errors.write + errors.status + errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
