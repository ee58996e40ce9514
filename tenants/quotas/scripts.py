"""The Lua scripts that enforce quotas. Each runs atomically inside Redis, so every web
process (and every worker that reconciles) sees and changes one shared state: there is no
moment between "check" and "count" for another process to slip into.

Per tenant (keys are built in `limiter.py`; every key carries a TTL and expires on its own):
  rpm      zset  request id -> admitted at (ms)        the requests sliding log
  tpm      zset  request id -> admitted at (ms)        the tokens sliding log ...
  tpm:tok  hash  request id -> tokens counted          ... and what each entry counts
  streams  zset  request id -> lease ends at (ms)      concurrency slots in flight
  res      hash  request id -> "reserved:utc_day"      open reservations (reconcile/release)
  daily    hash  day -> UTC day number, used -> tokens the daily budget counter

Times are integer milliseconds. `now` comes from ARGV[1] when given (tests simulate time
with it) and from Redis's own clock (TIME) otherwise, so web hosts with skewed clocks
still share one clock. Reply numbers are integers; -1 as a retry time means "never".
"""

from __future__ import annotations

WINDOW_MS = 60_000
DAY_MS = 86_400_000

_PRELUDE = f"""
local WINDOW, DAY = {WINDOW_MS}, {DAY_MS}
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Drop the entries of zset `zkey` scored at or below `max_score`, and their fields in
-- hash `hkey` (if any), in chunks that stay under Lua's argument limit.
local function forget(zkey, hkey, max_score)
  local gone = redis.call('ZRANGEBYSCORE', zkey, '-inf', max_score)
  if #gone == 0 then return end
  if hkey then
    for i = 1, #gone, 1000 do
      redis.call('HDEL', hkey, unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
  redis.call('ZREMRANGEBYSCORE', zkey, '-inf', max_score)
end

-- Lengthen a key's TTL to at least `ms`, never shorten it.
local function extend(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end

-- Milliseconds until the newest entry of a sliding log leaves the window (0 if empty).
local function reset_in(zkey)
  local last = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
  if #last == 0 then return 0 end
  return math.max(0, tonumber(last[2]) + WINDOW - now)
end

local function daily_used(dkey, day)
  local d = redis.call('HMGET', dkey, 'day', 'used')
  if tonumber(d[1]) == day then return tonumber(d[2]) or 0 end
  return 0
end
"""

# KEYS: rpm, tpm, tpm:tok, streams, res, daily, condition key, refused, then 4 keys per
#       subject (its rpm, tpm, tpm:tok, streams), then keys to store
# ARGV: now, request id, prompt tokens, max output tokens, rpm limit, tpm limit,
#       stream limit, daily budget, max prompt tokens, max output tokens, lease ms,
#       the condition key's expected value ('' for none), the number of subjects, then
#       per subject its name, rpm, tpm and stream limits, then a value and a TTL (ms)
#       for each key to store
# A subject is one visitor or one client IP of a widget key: its own sliding logs and
# streams, checked with the tenant's in this one step (`<name>_<limit>` when refused).
# A subject's stream slot frees when the tenant's reservation for the request closes
# (reconcile/release need not know the subject) or its lease lapses.
# refused: hash day -> UTC day number, <reason> -> refusals today (the usage data).
# Reply: allowed, reason, retry ms, rpm used, rpm reset ms, tpm used, tpm reset ms,
#        streams in flight, daily used, now ms (all after this admission), the
#        condition key's value
ADMIT = _PRELUDE + """
local id = ARGV[2]
local prompt, max_out = tonumber(ARGV[3]), tonumber(ARGV[4])
local rpm_limit, tpm_limit = tonumber(ARGV[5]), tonumber(ARGV[6])
local stream_limit, day_limit = tonumber(ARGV[7]), tonumber(ARGV[8])
local max_prompt, max_output = tonumber(ARGV[9]), tonumber(ARGV[10])
local lease = tonumber(ARGV[11])
local reserve = prompt + max_out
local since = now - WINDOW
local day = math.floor(now / DAY)

-- Housekeeping, not a decision: forget what left the windows and leases that lapsed
-- (a crashed worker's slot frees here).
forget(KEYS[1], nil, since)
forget(KEYS[2], KEYS[3], since)
forget(KEYS[4], KEYS[5], now)

local current = tonumber(redis.call('GET', KEYS[7]) or '0')

local function reply(allowed, reason, retry)
  local tpm_used = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[3])) do tpm_used = tpm_used + tonumber(v) end
  return {allowed, reason, retry,
          redis.call('ZCARD', KEYS[1]), reset_in(KEYS[1]),
          tpm_used, reset_in(KEYS[2]),
          redis.call('ZCARD', KEYS[4]), daily_used(KEYS[6], day), now, current}
end

local n_subjects = tonumber(ARGV[13]) or 0
local first_store_key, first_store_arg = 9 + 4 * n_subjects, 14 + 4 * n_subjects

-- The caller's state that goes with the admission (a request's spec), stored with it.
local function store()
  for i = first_store_key, #KEYS do
    local j = first_store_arg + (i - first_store_key) * 2
    redis.call('SET', KEYS[i], ARGV[j], 'PX', ARGV[j + 1])
  end
end

-- What was refused, and why, counted per UTC day for the tenant's usage data.
local function refused(reason)
  if tonumber(redis.call('HGET', KEYS[8], 'day')) ~= day then
    redis.call('DEL', KEYS[8]); redis.call('HSET', KEYS[8], 'day', day)
  end
  redis.call('HINCRBY', KEYS[8], reason, 1)
  redis.call('PEXPIRE', KEYS[8], (day + 1) * DAY - now + 3600000)
end

-- The caller's limits were read at a version of the condition key that is no longer
-- current (an operator changed them since): count nothing; it reads them again.
if ARGV[12] ~= '' and tonumber(ARGV[12]) ~= current then return reply(0, 'stale', -1) end

-- The same request admitted twice (a retried call) is not counted twice.
if redis.call('HEXISTS', KEYS[5], id) == 1 then store(); return reply(1, '', -1) end

-- The request itself: no amount of waiting helps.
if prompt > max_prompt then refused('prompt_too_long'); return reply(0, 'prompt_too_long', -1) end
if max_out > max_output then refused('max_tokens_too_large'); return reply(0, 'max_tokens_too_large', -1) end

-- Every rate limit is checked; the reason reported is the one that keeps the request
-- out longest, and the retry time is that wait (-1, never, beats everything).
local reason, retry = false, 0
local function block(r, ms)
  if not reason or (retry ~= -1 and (ms == -1 or ms > retry)) then reason, retry = r, ms end
end

local rpm_used = redis.call('ZCARD', KEYS[1])
if rpm_used + 1 > rpm_limit then
  if rpm_limit < 1 then block('requests_per_minute', -1) else
    -- passes once enough of the oldest entries have left for one more to fit
    local e = redis.call('ZRANGE', KEYS[1], rpm_used - rpm_limit, rpm_used - rpm_limit, 'WITHSCORES')
    block('requests_per_minute', tonumber(e[2]) + WINDOW - now)
  end
end

local tok = redis.call('HGETALL', KEYS[3])
local tpm_used, counted = 0, {}
for i = 1, #tok, 2 do
  counted[tok[i]] = tonumber(tok[i + 1]); tpm_used = tpm_used + counted[tok[i]]
end
if tpm_used + reserve > tpm_limit then
  if reserve > tpm_limit then block('tokens_per_minute', -1) else
    local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    local left = tpm_used
    for i = 1, #entries, 2 do
      left = left - (counted[entries[i]] or 0)
      if left + reserve <= tpm_limit then
        block('tokens_per_minute', tonumber(entries[i + 1]) + WINDOW - now); break
      end
    end
  end
end

if redis.call('ZCARD', KEYS[4]) >= stream_limit then
  -- a slot frees when some stream ends, which no clock predicts: ask again soon
  if stream_limit < 1 then block('concurrent_streams', -1) else block('concurrent_streams', 1000) end
end

if daily_used(KEYS[6], day) + reserve > day_limit then
  if reserve > day_limit then block('daily_token_budget', -1) else
    block('daily_token_budget', (day + 1) * DAY - now)
  end
end

-- Each subject (a widget visitor, a client IP): its own requests and tokens per minute
-- and streams, so one of them cannot spend what the tenant's other visitors need.
for s = 0, n_subjects - 1 do
  local k, a = 9 + 4 * s, 14 + 4 * s
  local name = ARGV[a]
  local s_rpm, s_tpm, s_streams = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  forget(KEYS[k], nil, since)
  forget(KEYS[k + 1], KEYS[k + 2], since)
  forget(KEYS[k + 3], nil, now)
  for _, open in ipairs(redis.call('ZRANGE', KEYS[k + 3], 0, -1)) do
    if redis.call('HEXISTS', KEYS[5], open) == 0 then redis.call('ZREM', KEYS[k + 3], open) end
  end
  local used = redis.call('ZCARD', KEYS[k])
  if used + 1 > s_rpm then
    if s_rpm < 1 then block(name .. '_requests_per_minute', -1) else
      local e = redis.call('ZRANGE', KEYS[k], used - s_rpm, used - s_rpm, 'WITHSCORES')
      block(name .. '_requests_per_minute', tonumber(e[2]) + WINDOW - now)
    end
  end
  local s_tok, s_used = {}, 0
  local t = redis.call('HGETALL', KEYS[k + 2])
  for i = 1, #t, 2 do s_tok[t[i]] = tonumber(t[i + 1]); s_used = s_used + s_tok[t[i]] end
  if s_used + reserve > s_tpm then
    if reserve > s_tpm then block(name .. '_tokens_per_minute', -1) else
      local entries = redis.call('ZRANGE', KEYS[k + 1], 0, -1, 'WITHSCORES')
      local left = s_used
      for i = 1, #entries, 2 do
        left = left - (s_tok[entries[i]] or 0)
        if left + reserve <= s_tpm then
          block(name .. '_tokens_per_minute', tonumber(entries[i + 1]) + WINDOW - now); break
        end
      end
    end
  end
  if redis.call('ZCARD', KEYS[k + 3]) >= s_streams then
    if s_streams < 1 then block(name .. '_concurrent_streams', -1) else block(name .. '_concurrent_streams', 1000) end
  end
end

if reason then refused(reason); return reply(0, reason, retry) end

-- Admitted: record everything, in this same script.
store()
for s = 0, n_subjects - 1 do
  local k = 9 + 4 * s
  redis.call('ZADD', KEYS[k], now, id)
  redis.call('ZADD', KEYS[k + 1], now, id)
  redis.call('HSET', KEYS[k + 2], id, reserve)
  redis.call('ZADD', KEYS[k + 3], now + lease, id)
  for i = 0, 2 do redis.call('PEXPIRE', KEYS[k + i], WINDOW) end
  extend(KEYS[k + 3], lease)
end
redis.call('ZADD', KEYS[1], now, id)
redis.call('ZADD', KEYS[2], now, id)
redis.call('HSET', KEYS[3], id, reserve)
redis.call('ZADD', KEYS[4], now + lease, id)
redis.call('HSET', KEYS[5], id, reserve .. ':' .. day)
if tonumber(redis.call('HGET', KEYS[6], 'day')) == day then
  redis.call('HINCRBY', KEYS[6], 'used', reserve)
else
  redis.call('HSET', KEYS[6], 'day', day, 'used', reserve)
end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], WINDOW) end
extend(KEYS[4], lease); extend(KEYS[5], lease)
-- kept an hour past midnight; the day field makes a stale counter harmless anyway
redis.call('PEXPIRE', KEYS[6], (day + 1) * DAY - now + 3600000)
return reply(1, '', -1)
"""

# Reconcile and release: replace the reservation by what was really used.
# KEYS: tpm, tpm:tok, streams, res, daily   ARGV: now, request id, tokens actually used
# Reply: 1 if the reservation was open (and is now closed), 0 if nothing was left to do.
SETTLE = _PRELUDE + """
local id, actual = ARGV[2], tonumber(ARGV[3])
local rec = redis.call('HGET', KEYS[4], id)
if not rec then return 0 end
local reserved, day = string.match(rec, '^(%d+):(%d+)$')
reserved, day = tonumber(reserved), tonumber(day)

-- The tokens window keeps the entry at its admission time; only its count changes, and
-- only while it is still inside the window.
local at = redis.call('ZSCORE', KEYS[1], id)
if at and tonumber(at) > now - WINDOW then redis.call('HSET', KEYS[2], id, actual) end

-- The daily counter, if it is still the day the reservation was taken on.
local d = redis.call('HMGET', KEYS[5], 'day', 'used')
if tonumber(d[1]) == day then
  redis.call('HSET', KEYS[5], 'used', math.max(0, (tonumber(d[2]) or 0) + actual - reserved))
end

redis.call('HDEL', KEYS[4], id)
redis.call('ZREM', KEYS[3], id)
return 1
"""

# Extend an open stream's lease (a long generation's heartbeat).
# KEYS: streams, res   ARGV: now, request id, lease ms   Reply: 1, or 0 if not open.
TOUCH = _PRELUDE + """
local id, lease = ARGV[2], tonumber(ARGV[3])
local ends = redis.call('ZSCORE', KEYS[1], id)
if not ends or tonumber(ends) <= now or redis.call('HEXISTS', KEYS[2], id) == 0 then return 0 end
redis.call('ZADD', KEYS[1], now + lease, id)
extend(KEYS[1], lease); extend(KEYS[2], lease)
return 1
"""

# Read-only: what is in use now.
# KEYS: rpm, tpm, tpm:tok, streams, daily, refused
# Reply: rpm used, rpm reset ms, tpm used, tpm reset ms, streams in flight, daily used, now,
#        the refused hash (flat)
SNAPSHOT = _PRELUDE + """
local since = now - WINDOW
local function window_reset(zkey)
  local last = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
  if #last == 0 or tonumber(last[2]) <= since then return 0 end
  return reset_in(zkey)
end
local tpm_used = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. since, '+inf')) do
  tpm_used = tpm_used + (tonumber(redis.call('HGET', KEYS[3], id)) or 0)
end
return {redis.call('ZCOUNT', KEYS[1], '(' .. since, '+inf'), window_reset(KEYS[1]),
        tpm_used, window_reset(KEYS[2]),
        redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf'),
        daily_used(KEYS[5], math.floor(now / DAY)), now, redis.call('HGETALL', KEYS[6])}
"""
