/**
 * The Lua scripts of the rate-limit store. `CONSUME_LUA` is a mirror of `decideConsume` from `@petstore/core`
 * (rate-limit/fixed-window.ts), run by Redis atomically, so concurrent consumes of one record — also from
 * different processes — never interleave. One call decides a **batch** of consumes, in order: the store
 * gathers the consumes one process starts within one turn of its event loop into one call (see
 * consume-batches.ts), and every consume in it is decided and charged exactly as if it had come alone.
 *
 * KEYS[1..B]  the keys of the B consumes, `${keyPrefix}rl:${key}` (a key may appear several times; on a Redis
 *             Cluster all share one hash slot). Each holds one string value: the record (layout below).
 * ARGV[1]     'server' (decide at Redis's clock, TIME, read once for the batch) or 'request' (each consume
 *             brings its own nowMs).
 * ARGV[2]     the caller's deadline, Unix epoch ms on Redis's clock: when TIME reads it or later, the caller has
 *             given up on the batch (answered it 503), so the script reads and writes nothing and answers
 *             "expired". Checked once, first: a script runs alone, so nothing after the check waits.
 * ARGV[3]     P, the number of distinct policies in the batch; then three arguments per policy:
 *             - the windows' signature: `[[name, limit, windowMs], …]` as JSON, in request order (stored as it
 *               is, so the record tells what each window was last charged with);
 *             - the `struct` format of the record's numbers for these windows: '<BI4' then 2n 'd';
 *             - the policy's numbers as a JSON array: n, ban rejectedThreshold (0: no ban policy), ban
 *               intervalMs, ban durationMs, the n limits, the n windowMs (one `cjson.decode` per policy and
 *               batch; plain ASCII, so the client sends the call as text).
 * then, per consume: its policy's number 1..P, its cost (units), its ban subject (a keyId, '' for an anonymous
 * record), and in 'request' mode its nowMs.
 *
 * The record (see `rateLimitRedisKey` for the byte table): `struct.pack('<BI4' .. 'd' × 2n)` of n, the
 * signature's length, the n window starts, the n window counts; then the signature; then one entry per ban
 * subject that is banned or counting rejections: `struct.pack('<dddI4')` of the rejection interval's start and
 * count (0, 0: none), the ban's end (0: none) and the subject's length, then the subject. Times are Unix epoch
 * ms, all numbers integers (doubles: exact below 2^53).
 *
 * Each key is read once per batch (GET) and written once at the end (SET … PX with its final record, PEXPIRE
 * when only bans answered for it, DEL when nothing in it matters any more): consumes of one key later in the
 * batch see the record the earlier ones left. Every write sets the key's expiry to the latest instant its record
 * still matters (window resets, ban ends, rejection-interval ends), so a key that lost its TTL gets it back.
 *
 * Returns a flat array of integers: Redis's clock (TIME, Unix epoch ms), then `-1` alone when the deadline had
 * passed, else per consume { outcome,
 * bannedUntilMs, used_1, …, used_n } with outcome 0 = allowed, 1 = rate_limited, 2 = banned, 3 = the key holds
 * a value of another type, 4 = the key holds a string that is not a record (nothing read or written for it in
 * both cases), and the used count of each window in request order (the client derives each window's reset
 * from the decision's nowMs).
 *
 * When the request's windows differ from those stored (another signature: a plan change, or a new key), counts
 * carry over by window name where the window's length is the same, and windows the request no longer names are
 * dropped.
 *
 * A batch pays a call's fixed cost, TIME and the policies once, and each key's GET and SET once however often the
 * key appears (costs: BENCHMARKS.md, section "Redis CPU per decision: the consume script and its pieces"). One
 * packed value rather than a hash per key, and SET … PX rather than KEEPTTL, so a key that lost its TTL gets one
 * back. The bans part of a record is read only when the record has one.
 */
export const CONSUME_LUA = `
local call, tonumber, sub, byte, max = redis.call, tonumber, string.sub, string.byte, math.max
local unpackStruct, packStruct = struct.unpack, struct.pack
local serverTime = ARGV[1] == 'server'
local t = call('TIME')
local clock = t[1] * 1000 + math.floor(t[2] / 1000)
-- The caller gave up on this batch: charge nothing.
if clock >= tonumber(ARGV[2]) then return { clock, -1 } end
local now = serverTime and clock or 0

-- policies[p] = { signature, format, { n, banThreshold, banInterval, banDuration, limits…, windowMs… } }
local policyCount = tonumber(ARGV[3])
local policies = {}
for p = 1, policyCount do
  policies[p] = { ARGV[3 * p + 1], ARGV[3 * p + 2], cjson.decode(ARGV[3 * p + 3]) }
end

-- A record: { sig, format, st = { n, #sig, starts…, counts… }, bans = { subject, rejection start,
-- rejection count, ban end, subject, … } (4 slots per ban subject), the stored windows decoded (only when they
-- are not the policy's) }.
local function decode(value, policy)
  local n = byte(value, 1)
  local format = policy[2]
  if n ~= policy[3][1] then format = '<BI4' .. string.rep('d', 2 * n) end
  local st = { unpackStruct(format, value) }
  local from = st[3 + 2 * n]
  st[3 + 2 * n] = nil
  local to = from + st[2]
  local sig = sub(value, from, to - 1)
  if #sig ~= st[2] then error('truncated') end
  local bans, b = {}, 0
  while to <= #value do
    local rejectedStart, rejectedCount, bannedUntil, length, at = unpackStruct('<dddI4', value, to)
    to = at + length
    bans[b + 1], bans[b + 2], bans[b + 3], bans[b + 4] = sub(value, at, to - 1), rejectedStart, rejectedCount, bannedUntil
    b = b + 4
  end
  if to ~= #value + 1 then error('truncated') end
  local stored = false
  if sig ~= policy[1] then
    stored = cjson.decode(sig)
    for j = 1, n do
      if type(stored[j][1]) ~= 'string' or type(stored[j][3]) ~= 'number' then error('not a signature') end
    end
  end
  return { sig, format, st, bans, stored }
end

local function encode(record)
  local bans = record[4]
  local parts = { packStruct(record[2], unpack(record[3])), record[1] }
  for b = 1, #bans, 4 do
    parts[#parts + 1] = packStruct('<dddI4', bans[b + 1], bans[b + 2], bans[b + 3], #bans[b])
    parts[#parts + 1] = bans[b]
  end
  return table.concat(parts)
end

-- Decides one consume at now for subject on record (changed in place unless banned). Fills used with the count
-- of each window (after the charge when admitted). Returns outcome, ban end, whether the record changed, and
-- until when (epoch ms) the record matters.
local starts = {}
local function decide(record, policy, cost, subject, now, used)
  local sig, numbers = policy[1], policy[3]
  local n, banThreshold, banInterval = numbers[1], numbers[2], numbers[3]
  local st, bans = record[3], record[4]
  local same = record[1] == sig
  local stored, storedN, index, names
  if not same and record[1] then
    -- Other windows stored: a count carries over by name, when the window's length is the same.
    stored, storedN, index, names = record[5] or cjson.decode(record[1]), st[1], {}, cjson.decode(sig)
    for j = 1, storedN do index[stored[j][1]] = j end
  end
  local hasRoom = true
  for i = 1, n do
    local windowMs = numbers[4 + n + i]
    local start = now - now % windowMs
    local count = 0
    if same then
      if st[2 + i] == start then count = st[2 + n + i] end
    elseif index then
      local j = index[names[i][1]]
      if j and stored[j][3] == windowMs and st[2 + j] == start then count = st[2 + storedN + j] end
    end
    starts[i], used[i] = start, count
    if count + cost > numbers[4 + i] then hasRoom = false end
  end

  local own = 0
  for b = 1, #bans, 4 do
    if bans[b] == subject then own = b break end
  end
  if own > 0 and bans[own + 3] > now then
    -- Banned: nothing changes; the record matters until the latest end of what it holds.
    local at = now
    for j = 1, st[1] do
      local windowMs = same and numbers[4 + n + j] or stored[j][3]
      at = max(at, st[2 + j] + windowMs)
    end
    for b = 1, #bans, 4 do
      at = max(at, bans[b + 3])
      if banThreshold > 0 and bans[b + 2] > 0 then at = max(at, bans[b + 1] + banInterval) end
    end
    return 2, bans[own + 3], false, at
  end

  -- The windows of this request, charged when every one has room for the cost.
  if not same then
    st = { n, #sig }
    record[1], record[2], record[3], record[5] = sig, policy[2], st, false
  end
  local at = now
  for i = 1, n do
    if hasRoom then used[i] = used[i] + cost end
    st[2 + i], st[2 + n + i] = starts[i], used[i]
    at = max(at, starts[i] + numbers[4 + n + i])
  end

  -- Every subject's ended ban and ended (or, without a ban policy, any) rejection count go.
  local kept, k = {}, 0
  local outcome, banEnd = 0, 0
  for b = 1, #bans, 4 do
    if b ~= own or hasRoom then
      local rejectedStart, rejectedCount, bannedUntil = bans[b + 1], bans[b + 2], bans[b + 3]
      if bannedUntil <= now then bannedUntil = 0 end
      if banThreshold == 0 or rejectedStart + banInterval <= now then rejectedStart, rejectedCount = 0, 0 end
      if bannedUntil > 0 or rejectedCount > 0 then
        kept[k + 1], kept[k + 2], kept[k + 3], kept[k + 4] = bans[b], rejectedStart, rejectedCount, bannedUntil
        k = k + 4
      end
    end
  end
  if not hasRoom then
    outcome = 1
    if banThreshold > 0 then
      -- Refused: counts once toward the subject's ban in the current interval; the threshold-th starts it.
      local intervalStart = now - now % banInterval
      local count = 1
      if own > 0 and bans[own + 2] > 0 and bans[own + 1] == intervalStart then count = bans[own + 2] + 1 end
      if count >= banThreshold then
        outcome, banEnd = 2, now + numbers[4]
        kept[k + 1], kept[k + 2], kept[k + 3], kept[k + 4] = subject, 0, 0, banEnd
      else
        kept[k + 1], kept[k + 2], kept[k + 3], kept[k + 4] = subject, intervalStart, count, 0
      end
      k = k + 4
    end
  end
  record[4] = kept
  for b = 1, k, 4 do
    at = max(at, kept[b + 3])
    if kept[b + 2] > 0 then at = max(at, kept[b + 1] + banInterval) end
  end
  return outcome, banEnd, true, at
end

-- Per key in the batch: its record (3 or 4: not readable), whether it must be written, and its expiry (PX).
local records, dirty, ttl, keys = {}, {}, {}, {}
local reply, r = { clock }, 1
local used = {}
local arg = 4 + 3 * policyCount
for k = 1, #KEYS do
  local key, policy = KEYS[k], policies[tonumber(ARGV[arg])]
  local cost, subject, itemNow = tonumber(ARGV[arg + 1]), ARGV[arg + 2], now
  if serverTime then arg = arg + 3 else itemNow, arg = tonumber(ARGV[arg + 3]), arg + 4 end
  local n = policy[3][1]
  local record = records[key]
  if record == nil then
    local value = redis.pcall('GET', key)
    if type(value) == 'table' then
      record = 3
    elseif value then
      local ok, decoded = pcall(decode, value, policy)
      record = ok and decoded or 4
    else
      record = { false, policy[2], { 0, 0 }, {}, false }
    end
    records[key] = record
    if record ~= 3 and record ~= 4 then keys[#keys + 1] = key end
  end
  if record == 3 or record == 4 then
    reply[r + 1], reply[r + 2] = record, 0
    for i = 1, n do reply[r + 2 + i] = 0 end
  else
    local outcome, banEnd, changed, at = decide(record, policy, cost, subject, itemNow, used)
    if changed then dirty[key] = true end
    ttl[key] = at - itemNow
    reply[r + 1], reply[r + 2] = outcome, banEnd
    for i = 1, n do reply[r + 2 + i] = used[i] end
  end
  r = r + 2 + n
end
for _, key in ipairs(keys) do
  local expiresIn = ttl[key]
  if expiresIn <= 0 then
    call('DEL', key)
  elseif dirty[key] then
    call('SET', key, encode(records[key]), 'PX', expiresIn)
  else
    call('PEXPIRE', key, expiresIn)
  end
end
return reply
`;

/**
 * The script behind `peek` in `'server'` mode: Redis's clock and the record, in one call (one read). Returns
 * `[seconds, microseconds, value or nil]`.
 */
export const PEEK_LUA = `
local t = redis.call('TIME')
return { t[1], t[2], redis.call('GET', KEYS[1]) }
`;
