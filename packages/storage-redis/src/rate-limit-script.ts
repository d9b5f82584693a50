/**
 * The Lua script behind one `consume`: a mirror of `decideConsume` from `@petstore/core`
 * (rate-limit/fixed-window.ts), run by Redis atomically, so concurrent consumes of one key — also from
 * different processes — never interleave.
 *
 * KEYS[1]  the key's hash, `${keyPrefix}rl:${key}`.
 * ARGV[1]  'server' (decide at Redis's clock, TIME) or nowMs (decide at the caller's clock).
 * ARGV[2]  the policy, a JSON array: ban enabled (1 | 0), ban rejectedThreshold, ban intervalMs, ban
 *          durationMs, the windows' signature, then per window its start field, its count field, limit and
 *          windowMs. The client builds it once per windows array and ban policy (see rate-limit-store.ts):
 *          two arguments instead of fourteen, as each argument costs the client more than cjson.decode
 *          costs Redis.
 *
 * The hash (decimal integers; times in Unix epoch ms), flat so one HMGET reads what a decision needs and one
 * HSET writes what changed — no string parsing, no rewrite of the whole hash:
 *   w:<name>:s, w:<name>:c   start and count of the window <name> (per name, so a plan change keeps usage)
 *   rej:s, rej:c             start and count of the current ban interval's rejections
 *   ban                      end of the ban; present only while a ban was started and not yet lifted
 *   sig                      the signature (window names) of the windows last written
 *
 * Returns an array of integers: { outcome, nowMs, bannedUntilMs, used_1, used_2, … } with outcome
 * 0 = allowed, 1 = rate_limited, 2 = banned, and the used count of each window in request order (the client
 * derives each window's reset from nowMs). Every call ends with PEXPIRE to the latest instant the state still matters (window resets, ban end,
 * rejection-interval end), also when nothing else was written, so a key that lost its TTL gets it back.
 * When the request's windows differ from those last written (the signature differs: a plan change, or a new
 * key), fields of windows the request no longer names are removed.
 *
 * Kept lean, as it runs once per request: the common admitted case makes four calls (TIME, HMGET, HSET,
 * PEXPIRE), field names come ready-made from the client, and numbers go to Redis as Lua numbers (Redis
 * writes integers below 2^53 exactly), not through string.format.
 */
export const CONSUME_LUA = `
local call, tonumber, floor, max, unpack = redis.call, tonumber, math.floor, math.max, unpack
local key = KEYS[1]
local now
if ARGV[1] == 'server' then
  local t = call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local policy = cjson.decode(ARGV[2])
local banOn = policy[1] == 1
local banThreshold = policy[2]
local banInterval = policy[3]
local banDuration = policy[4]
local signature = policy[5]
local n = (#policy - 5) / 4

-- Fields: 1 rej:s, 2 rej:c, 3 ban, 4 sig, then window i's start at 3 + 2i and count at 4 + 2i.
local fields = { 'rej:s', 'rej:c', 'ban', 'sig' }
for i = 1, n do
  fields[3 + i * 2] = policy[2 + i * 4]
  fields[4 + i * 2] = policy[3 + i * 4]
end
local values = call('HMGET', key, unpack(fields))
local rejStart = tonumber(values[1])
local rejCount = tonumber(values[2])
local bannedUntil = tonumber(values[3]) or 0

-- Windows: counters of ended windows read as 0.
local starts, counts = {}, {}
local hasRoom = true
local sameStarts = values[4] == signature
local expiresAt = now
for i = 1, n do
  local windowMs = policy[5 + i * 4]
  local start = floor(now / windowMs) * windowMs
  local count = 0
  if tonumber(values[3 + i * 2]) == start then
    count = tonumber(values[4 + i * 2]) or 0
  else
    sameStarts = false
  end
  if count + 1 > policy[4 + i * 4] then hasRoom = false end
  local reset = start + windowMs
  if reset > expiresAt then expiresAt = reset end
  starts[i], counts[i] = start, count
end
local rejectedEnd = 0
if rejStart and banOn then rejectedEnd = rejStart + banInterval end

local function answer(outcome, banEnd)
  local reply = { outcome, now, banEnd }
  for i = 1, n do reply[3 + i] = counts[i] end
  return reply
end

local function expire(at)
  local ttl = at - now
  if ttl > 0 then call('PEXPIRE', key, ttl) else call('DEL', key) end
end

-- Banned: nothing charged, state unchanged, ban not extended.
if bannedUntil > now then
  expire(max(expiresAt, bannedUntil, rejectedEnd))
  return answer(2, bannedUntil)
end

-- The common case, kept short: room in every window, each counter already in its current window, the
-- same windows as last time and no ban to lift. Only the counts are written.
if hasRoom and sameStarts and not values[3] then
  local args = {}
  for i = 1, n do
    counts[i] = counts[i] + 1
    args[2 * i - 1] = fields[4 + i * 2]
    args[2 * i] = counts[i]
  end
  call('HSET', key, unpack(args))
  expire(max(expiresAt, rejectedEnd))
  return answer(0, 0)
end

-- Writes the request's windows and the extra fields, and deletes the given fields when present. When the
-- windows changed (other signature), first drops the fields of windows the request no longer names.
local function store(extra, deletions)
  local args = {}
  if values[4] ~= signature then
    local keep = {}
    for i = 1, #fields do keep[fields[i]] = true end
    local stale = {}
    for _, field in ipairs(call('HKEYS', key)) do
      if not keep[field] then stale[#stale + 1] = field end
    end
    if #stale > 0 then call('HDEL', key, unpack(stale)) end
    args[1], args[2] = 'sig', signature
  end
  for i = 1, n do
    args[#args + 1] = fields[3 + i * 2]
    args[#args + 1] = starts[i]
    args[#args + 1] = fields[4 + i * 2]
    args[#args + 1] = counts[i]
  end
  for i = 1, #extra do args[#args + 1] = extra[i] end
  if #args > 0 then call('HSET', key, unpack(args)) end
  local gone = {}
  for _, index in ipairs(deletions) do
    if values[index] then gone[#gone + 1] = fields[index] end
  end
  if #gone > 0 then call('HDEL', key, unpack(gone)) end
end

-- Room in every window: charge them all; the rejection counter stays as it was, a lifted ban goes.
if hasRoom then
  for i = 1, n do counts[i] = counts[i] + 1 end
  store({}, { 3 })
  expire(max(expiresAt, rejectedEnd))
  return answer(0, 0)
end

-- Rejected without a ban policy: nothing charged, nothing counted.
if not banOn then
  store({}, { 1, 2, 3 })
  expire(expiresAt)
  return answer(1, 0)
end

-- Rejected: count it toward a ban in the current interval; the threshold-th rejection starts the ban.
local intervalStart = floor(now / banInterval) * banInterval
local rejectedCount = 1
if rejStart == intervalStart then rejectedCount = (rejCount or 0) + 1 end
if rejectedCount >= banThreshold then
  local banEnd = now + banDuration
  store({ 'ban', banEnd }, { 1, 2 })
  expire(max(expiresAt, banEnd))
  return answer(2, banEnd)
end
store({ 'rej:s', intervalStart, 'rej:c', rejectedCount }, { 3 })
expire(max(expiresAt, intervalStart + banInterval))
return answer(1, 0)
`;
