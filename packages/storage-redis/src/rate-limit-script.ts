/**
 * The Lua script behind one `consume`: a line-for-line mirror of `decideConsume` from `@petstore/core`
 * (rate-limit/fixed-window.ts), run by Redis atomically, so concurrent consumes of one key — also from
 * different processes — never interleave.
 *
 * KEYS[1]  the key's hash, `${keyPrefix}rl:${key}`.
 * ARGV     mode ('server' | 'request'), nowMs (used in 'request' mode), ban enabled ('1' | '0'),
 *          ban rejectedThreshold, ban intervalMs, ban durationMs, then name, limit, windowMs per window.
 *
 * The hash (all numbers are decimal integers, times in Unix epoch ms):
 *   w:<window name>  "<windowStartMs>:<count>"     one per window name, so a plan change keeps usage
 *   rej              "<intervalStartMs>:<count>"   rejections toward a ban in the current ban interval
 *   ban              "<bannedUntilMs>"             present only while a ban was started and not yet lifted
 *
 * Returns an array of integers: { outcome, nowMs, bannedUntilMs, used_1, resetAtMs_1, used_2, … } with
 * outcome 0 = allowed, 1 = rate_limited, 2 = banned, and one (used, resetAtMs) pair per window in request
 * order. Every call ends with PEXPIRE to the latest instant the state still matters (window resets, ban end,
 * rejection-interval end), also when nothing else was written, so a key that lost its TTL gets it back.
 */
export const CONSUME_LUA = `
local key = KEYS[1]
local now
if ARGV[1] == 'server' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end
local banOn = ARGV[3] == '1'
local banThreshold = tonumber(ARGV[4])
local banInterval = tonumber(ARGV[5])
local banDuration = tonumber(ARGV[6])

local function fmt(n) return string.format('%.0f', n) end
local function parseCounter(value)
  if not value then return nil end
  local s, c = string.match(value, '^(%-?%d+):(%d+)$')
  if not s then return nil end
  return { startMs = tonumber(s), count = tonumber(c) }
end

local stored = {}
local raw = redis.call('HGETALL', key)
for i = 1, #raw, 2 do stored[raw[i]] = raw[i + 1] end
local rejected = parseCounter(stored['rej'])
local bannedUntil = tonumber(stored['ban'] or '0') or 0

-- Windows: counters of ended windows read as 0.
local counters, order, usage = {}, {}, {}
local hasRoom = true
local expiresAt = now
local i = 7
while i + 2 <= #ARGV do
  local name, limit, windowMs = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local startMs = math.floor(now / windowMs) * windowMs
  local previous = parseCounter(stored['w:' .. name])
  local count = 0
  if previous and previous.startMs == startMs then count = previous.count end
  if counters[name] == nil then order[#order + 1] = name end
  counters[name] = { startMs = startMs, count = count }
  if count + 1 > limit then hasRoom = false end
  local resetAt = startMs + windowMs
  if resetAt > expiresAt then expiresAt = resetAt end
  usage[#usage + 1] = { name = name, used = count, resetAt = resetAt }
  i = i + 3
end

local function expire(at)
  local ttl = at - now
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) else redis.call('DEL', key) end
end

-- Replaces the stored state with: the request's windows, the given rejection counter, the given ban end.
local function store(rej, banEnd)
  redis.call('DEL', key)
  local fields = {}
  for _, name in ipairs(order) do
    fields[#fields + 1] = 'w:' .. name
    fields[#fields + 1] = fmt(counters[name].startMs) .. ':' .. fmt(counters[name].count)
  end
  if rej then
    fields[#fields + 1] = 'rej'
    fields[#fields + 1] = fmt(rej.startMs) .. ':' .. fmt(rej.count)
  end
  if banEnd > 0 then
    fields[#fields + 1] = 'ban'
    fields[#fields + 1] = fmt(banEnd)
  end
  if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
end

local function answer(outcome, banEnd)
  local reply = { outcome, now, banEnd }
  for _, entry in ipairs(usage) do
    reply[#reply + 1] = entry.used
    reply[#reply + 1] = entry.resetAt
  end
  return reply
end

local function endOfRejected(rej)
  if rej and banOn then return rej.startMs + banInterval end
  return 0
end

-- Banned: nothing charged, state unchanged, ban not extended.
if bannedUntil > now then
  expire(math.max(expiresAt, bannedUntil, endOfRejected(rejected)))
  return answer(2, bannedUntil)
end

-- Room in every window: charge them all.
if hasRoom then
  for _, entry in ipairs(usage) do
    local counter = counters[entry.name]
    counter.count = counter.count + 1
    entry.used = counter.count
  end
  store(rejected, 0)
  expire(math.max(expiresAt, endOfRejected(rejected)))
  return answer(0, 0)
end

-- Rejected without a ban policy: nothing charged, nothing counted.
if not banOn then
  store(nil, 0)
  expire(expiresAt)
  return answer(1, 0)
end

-- Rejected: count it toward a ban in the current interval; the threshold-th rejection starts the ban.
local intervalStart = math.floor(now / banInterval) * banInterval
local rejectedCount = 1
if rejected and rejected.startMs == intervalStart then rejectedCount = rejected.count + 1 end
if rejectedCount >= banThreshold then
  local banEnd = now + banDuration
  store(nil, banEnd)
  expire(math.max(expiresAt, banEnd))
  return answer(2, banEnd)
end
store({ startMs = intervalStart, count = rejectedCount }, 0)
expire(math.max(expiresAt, intervalStart + banInterval))
return answer(1, 0)
`;
