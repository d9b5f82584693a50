/**
 * The Lua script behind one `consume`: a mirror of `decideConsume` from `@petstore/core`
 * (rate-limit/fixed-window.ts), run by Redis atomically, so concurrent consumes of one key — also from
 * different processes — never interleave.
 *
 * KEYS[1]  the key's hash, `${keyPrefix}rl:${key}`.
 * ARGV     mode ('server' | 'request'), nowMs (used in 'request' mode), ban enabled ('1' | '0'),
 *          ban rejectedThreshold, ban intervalMs, ban durationMs, then name, limit, windowMs per window.
 *
 * The hash (decimal integers; times in Unix epoch ms), flat so one HMGET reads what a decision needs and one
 * HSET writes what changed — no string parsing, no rewrite of the whole hash:
 *   w:<name>:s, w:<name>:c   start and count of the window <name> (per name, so a plan change keeps usage)
 *   rej:s, rej:c             start and count of the current ban interval's rejections
 *   ban                      end of the ban; present only while a ban was started and not yet lifted
 *
 * Returns an array of integers: { outcome, nowMs, bannedUntilMs, used_1, resetAtMs_1, used_2, … } with
 * outcome 0 = allowed, 1 = rate_limited, 2 = banned, and one (used, resetAtMs) pair per window in request
 * order. Every call ends with PEXPIRE to the latest instant the state still matters (window resets, ban end,
 * rejection-interval end), also when nothing else was written, so a key that lost its TTL gets it back.
 * Fields of windows the request no longer names are removed (found cheaply: HLEN exceeds what was read).
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
local n = (#ARGV - 6) / 3

local fields = { 'rej:s', 'rej:c', 'ban' }
for i = 0, n - 1 do
  local name = ARGV[7 + i * 3]
  fields[4 + i * 2] = 'w:' .. name .. ':s'
  fields[5 + i * 2] = 'w:' .. name .. ':c'
end
local values = redis.call('HMGET', key, unpack(fields))
local present = 0
for i = 1, #fields do if values[i] then present = present + 1 end end
local rejStart = tonumber(values[1])
local rejCount = tonumber(values[2])
local bannedUntil = tonumber(values[3]) or 0

local function fmt(x) return string.format('%.0f', x) end

-- Windows: counters of ended windows read as 0.
local starts, counts, resets = {}, {}, {}
local hasRoom = true
local expiresAt = now
for i = 1, n do
  local limit = tonumber(ARGV[5 + i * 3])
  local windowMs = tonumber(ARGV[6 + i * 3])
  local start = math.floor(now / windowMs) * windowMs
  local count = 0
  if tonumber(values[2 + i * 2]) == start then count = tonumber(values[3 + i * 2]) or 0 end
  if count + 1 > limit then hasRoom = false end
  local reset = start + windowMs
  if reset > expiresAt then expiresAt = reset end
  starts[i], counts[i], resets[i] = start, count, reset
end

local function answer(outcome, banEnd)
  local reply = { outcome, now, banEnd }
  for i = 1, n do
    reply[#reply + 1] = counts[i]
    reply[#reply + 1] = resets[i]
  end
  return reply
end

local function expire(at)
  local ttl = at - now
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) else redis.call('DEL', key) end
end

local function endOfRejected()
  if rejStart and banOn then return rejStart + banInterval end
  return 0
end

-- Banned: nothing charged, state unchanged, ban not extended.
if bannedUntil > now then
  expire(math.max(expiresAt, bannedUntil, endOfRejected()))
  return answer(2, bannedUntil)
end

-- Writes the request's windows (and extra fields), deletes the given fields when present, and drops the
-- fields of windows the request no longer names.
local function store(extra, deletions)
  local total = redis.call('HLEN', key)
  if total > present then
    local keep = {}
    for i = 1, #fields do keep[fields[i]] = true end
    for _, field in ipairs(redis.call('HKEYS', key)) do
      if not keep[field] then redis.call('HDEL', key, field) end
    end
  end
  local args = {}
  for i = 1, n do
    args[#args + 1] = fields[2 + i * 2]
    args[#args + 1] = fmt(starts[i])
    args[#args + 1] = fields[3 + i * 2]
    args[#args + 1] = fmt(counts[i])
  end
  for i = 1, #extra do args[#args + 1] = extra[i] end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
  local gone = {}
  for _, index in ipairs(deletions) do
    if values[index] then gone[#gone + 1] = fields[index] end
  end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
end

-- Room in every window: charge them all; the rejection counter stays as it was, a lifted ban goes.
if hasRoom then
  for i = 1, n do counts[i] = counts[i] + 1 end
  store({}, { 3 })
  local keepUntil = expiresAt
  if rejStart and banOn then keepUntil = math.max(keepUntil, rejStart + banInterval) end
  expire(keepUntil)
  return answer(0, 0)
end

-- Rejected without a ban policy: nothing charged, nothing counted.
if not banOn then
  store({}, { 1, 2, 3 })
  expire(expiresAt)
  return answer(1, 0)
end

-- Rejected: count it toward a ban in the current interval; the threshold-th rejection starts the ban.
local intervalStart = math.floor(now / banInterval) * banInterval
local rejectedCount = 1
if rejStart == intervalStart then rejectedCount = (rejCount or 0) + 1 end
if rejectedCount >= banThreshold then
  local banEnd = now + banDuration
  store({ 'ban', fmt(banEnd) }, { 1, 2 })
  expire(math.max(expiresAt, banEnd))
  return answer(2, banEnd)
end
store({ 'rej:s', fmt(intervalStart), 'rej:c', fmt(rejectedCount) }, { 3 })
expire(math.max(expiresAt, intervalStart + banInterval))
return answer(1, 0)
`;
