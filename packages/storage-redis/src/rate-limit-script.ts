/**
 * The Lua script behind `consume`: a mirror of `decideConsume` from `@petstore/core`
 * (rate-limit/fixed-window.ts), run by Redis atomically, so concurrent consumes of one key — also from
 * different processes — never interleave. One call decides a **batch** of consumes, in order: the store
 * gathers the consumes one process starts within one turn of its event loop into one call (see
 * consume-batches.ts), and every consume in it is decided and charged exactly as if it had come alone.
 *
 * KEYS[1..B]  the keys of the B consumes, `${keyPrefix}rl:${key}` (a key may appear several times; on a Redis
 *             Cluster all share one hash slot). Each holds one string value (layout below).
 * ARGV[1]     'server' (decide at Redis's clock, TIME, read once for the batch) or 'request' (each consume
 *             brings its own nowMs).
 * ARGV[2]     P, the number of distinct policies in the batch; then three arguments per policy:
 *             - the windows' signature: their names as a JSON array, in request order;
 *             - the `struct` format of the state's numbers for these windows: '<B' then 3 + 2n 'd';
 *             - the policy's numbers as a JSON array: n, ban rejectedThreshold (0: no ban policy), ban
 *               intervalMs, ban durationMs, the n limits, the n windowMs (one `cjson.decode` per policy and
 *               batch; plain ASCII, so the client sends the call as text).
 * then, per consume: its policy's number 1..P, and in 'request' mode its nowMs after it.
 *
 * The value: `struct.pack('<B' .. 'd' × (3 + 2n))` of n, rejection-interval start, rejection count, ban end,
 * the n window starts, the n window counts (times in Unix epoch ms, doubles: integers below 2^53 are exact),
 * then the signature the numbers belong to. A rejection count of 0 means no rejection interval; a ban end of
 * 0 means no ban.
 *
 * Each key is read once per batch (GET) and written once at the end (SET … PX with its final state, or
 * PEXPIRE when only a ban answered for it): consumes of one key later in the batch see the state the earlier
 * ones left. Every write sets the key's expiry to the latest instant its state still matters (window resets,
 * ban end, rejection-interval end), so a key that lost its TTL gets it back.
 *
 * Returns a flat array of integers: nowMs (server mode; 0 in request mode), then per consume { outcome,
 * bannedUntilMs, used_1, …, used_n } with outcome 0 = allowed, 1 = rate_limited, 2 = banned, 3 = the key holds
 * a value of another type (nothing read or written for it), and the used count of each window in request
 * order (the client derives each window's reset from the decision's nowMs).
 *
 * When the request's windows differ from those stored (another signature: a plan change with other window
 * names, or a new key), counts carry over by window name and windows the request no longer names are
 * dropped.
 *
 * What it costs Redis: every call pays a fixed cost for reading, parsing and answering the command, then each
 * piece of the script adds its own (TIME, GET, SET … PX, the policy's `cjson.decode`, the reply, the Lua that
 * reads and decides); measured against @fastify/rate-limit's INCR + PTTL script in BENCHMARKS.md, section
 * "Redis CPU per decision" (`npm run bench -- --only=script`). A batch pays the fixed cost, TIME and the policies
 * once, and each key's GET and SET once however often the key appears. Measured and left out when the layout
 * was chosen: a hash per key (HMGET, HSET, PEXPIRE), which cost more per decision than one packed value; the
 * policy packed as binary (cheaper for Redis, but ioredis then builds the whole command as a buffer, dearer for
 * the app); SET … KEEPTTL instead of PX (a little cheaper, but a key that lost its TTL would keep none until its
 * window rolls over).
 */
export const CONSUME_LUA = `
local call, tonumber, sub, max = redis.call, tonumber, string.sub, math.max
local serverTime = ARGV[1] == 'server'
local now = 0
if serverTime then
  local t = call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end

-- policies[p] = { signature, format, { n, banThreshold, banInterval, banDuration, limits…, windowMs… } }
local policyCount = tonumber(ARGV[2])
local policies = {}
for p = 1, policyCount do
  policies[p] = { ARGV[3 * p], ARGV[3 * p + 1], cjson.decode(ARGV[3 * p + 2]) }
end

-- The state of a key as value string: st = { n, rejection start, rejection count, ban end, starts…, counts… }.
local function readState(value, signature, format, n)
  if value and #value == 25 + 16 * n + #signature and sub(value, 26 + 16 * n) == signature then
    return { struct.unpack(format, value) }
  end
  -- A new key, or other windows than stored: carry counts over by window name.
  local st = { n, 0, 0, 0 }
  for i = 5, 4 + 2 * n do st[i] = 0 end
  if value then
    local n0 = string.byte(value, 1)
    local old = { struct.unpack('<B' .. string.rep('d', 3 + 2 * n0), value) }
    st[2], st[3], st[4] = old[2], old[3], old[4]
    local names, index = cjson.decode(signature), {}
    for j, name in ipairs(cjson.decode(sub(value, 26 + 16 * n0))) do index[name] = j end
    for i = 1, n do
      local j = index[names[i]]
      if j then st[4 + i], st[4 + n + i] = old[4 + j], old[4 + n0 + j] end
    end
  end
  return st
end

-- Decides one consume at now on state st (changed in place). Returns outcome, ban end, whether st changed,
-- and until when (epoch ms) the resulting state matters.
local function decide(st, policy, now)
  local n, banThreshold = policy[1], policy[2]
  -- Windows: counters of ended windows read as 0.
  local hasRoom, expiresAt = true, now
  for i = 1, n do
    local windowMs = policy[4 + n + i]
    local start = now - now % windowMs
    if st[4 + i] ~= start then
      st[4 + i], st[4 + n + i] = start, 0
    end
    if st[4 + n + i] >= policy[4 + i] then hasRoom = false end
    if start + windowMs > expiresAt then expiresAt = start + windowMs end
  end
  local rejStart, rejCount, bannedUntil = st[2], st[3], st[4]
  local rejectedEnd = 0
  if banThreshold > 0 and rejCount > 0 then rejectedEnd = rejStart + policy[3] end
  if bannedUntil > now then
    -- Banned: nothing charged, state unchanged, ban not extended.
    return 2, bannedUntil, false, max(expiresAt, bannedUntil, rejectedEnd)
  elseif hasRoom then
    -- Room in every window: charge them all; the rejection counter stays as it was, a lifted ban goes.
    for i = 5 + n, 4 + 2 * n do st[i] = st[i] + 1 end
    st[4] = 0
    return 0, 0, true, max(expiresAt, rejectedEnd)
  elseif banThreshold == 0 then
    -- Rejected without a ban policy: nothing charged, nothing counted.
    st[2], st[3], st[4] = 0, 0, 0
    return 1, 0, true, expiresAt
  end
  -- Rejected: count it toward a ban in the current interval; the threshold-th rejection starts the ban.
  local banInterval = policy[3]
  local intervalStart = now - now % banInterval
  local rejectedCount = 1
  if rejCount > 0 and rejStart == intervalStart then rejectedCount = rejCount + 1 end
  if rejectedCount >= banThreshold then
    local banEnd = now + policy[4]
    st[2], st[3], st[4] = 0, 0, banEnd
    return 2, banEnd, true, max(expiresAt, banEnd)
  end
  st[2], st[3], st[4] = intervalStart, rejectedCount, 0
  return 1, 0, true, max(expiresAt, intervalStart + banInterval)
end

-- Per key in the batch: its latest value (false: none), whether it must be written, and its expiry (PX).
local values, dirty, ttl, keys = {}, {}, {}, {}
local reply, r = { now }, 1
local arg = 3 + 3 * policyCount
for k = 1, #KEYS do
  local key, policy = KEYS[k], policies[tonumber(ARGV[arg])]
  local itemNow = now
  if serverTime then arg = arg + 1 else itemNow, arg = tonumber(ARGV[arg + 1]), arg + 2 end
  local signature, format, numbers = policy[1], policy[2], policy[3]
  local n = numbers[1]
  local value = values[key]
  if value == nil then
    value = redis.pcall('GET', key)
    if type(value) == 'table' then value = nil end
    if value ~= nil then
      values[key] = value
      keys[#keys + 1] = key
    end
  end
  if value == nil then
    -- Another type of value under this key: nothing read or written.
    reply[r + 1], reply[r + 2] = 3, 0
    for i = 1, n do reply[r + 2 + i] = 0 end
  else
    local st = readState(value, signature, format, n)
    local outcome, banEnd, changed, at = decide(st, numbers, itemNow)
    if changed then
      values[key] = struct.pack(format, unpack(st, 1, 4 + 2 * n)) .. signature
      dirty[key] = true
    end
    ttl[key] = at - itemNow
    reply[r + 1], reply[r + 2] = outcome, banEnd
    for i = 1, n do reply[r + 2 + i] = st[4 + n + i] end
  end
  r = r + 2 + n
end
for _, key in ipairs(keys) do
  if dirty[key] then call('SET', key, values[key], 'PX', ttl[key]) else call('PEXPIRE', key, ttl[key]) end
end
return reply
`;
