/**
 * The Lua scripts of the rate-limit store. `CONSUME_LUA` is a mirror of `decideConsume` from `@petstore/core`
 * (rate-limit/decide.ts, and rate-limit/window-algorithms.ts for sliding and gcra windows), run by Redis atomically, so concurrent consumes of one record — also from
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
 *               is, so the record tells what each window was last charged with), a sliding or gcra window with
 *               its algorithm as a fourth element;
 *             - the `struct` format of the record's numbers for these windows: '<BI4' then 2n 'd';
 *             - the policy's numbers as a JSON array: n, ban rejectedThreshold (0: no ban policy), ban
 *               intervalMs, ban durationMs, the n limits, the n windowMs, and only when a window is not fixed,
 *               the n algorithms (0 fixed, 1 sliding, 2 gcra) (one `cjson.decode` per policy and batch; plain
 *               ASCII, so the client sends the call as text).
 * then, per consume: its policy's number 1..P, its cost (units), its ban subject (a keyId, '' for an anonymous
 * record), and in 'request' mode its nowMs.
 *
 * The record (see `rateLimitRedisKey` for the byte table): `struct.pack('<BI4' .. 'd' × 2n)` of n, the
 * signature's length, the n window starts, the n window counts; then the signature; then, per sliding window in
 * window order, `struct.pack('<d')` of its previous window's count (none when no window is sliding, so a record of
 * fixed windows is what it was before sliding and gcra existed); then one entry per ban
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
 * bannedUntilMs, used_1, …, used_n } (under a policy with a sliding or gcra window, { used_i, resetAtMs_i,
 * retryAtMs_i } per window instead, retryAtMs -1 when none) with outcome 0 = allowed, 1 = rate_limited, 2 = banned, 3 = the key holds
 * a value of another type, 4 = the key holds a string that is not a record (nothing read or written for it in
 * both cases), and the used count of each window in request order (the client derives each window's reset
 * from the decision's nowMs).
 *
 * When the request's windows differ from those stored (another signature: a plan change, or a new key), counts
 * carry over by window name where the window's length is the same, and windows the request no longer names are
 * dropped; a counter another algorithm wrote is converted to the units it holds, rounded up.
 *
 * One script for the three algorithms, not one per algorithm: a batch mixes policies of any algorithms, a plan
 * change converts a counter between them inside one decision, and the fixed path is the one it always was (its
 * windows decided by the same lines; the others go through `carry`, taken only when the policy or the record has a
 * sliding or gcra window). Numbers are doubles: every value is a whole number below 2^53 (unit-milliseconds are
 * at most limit × windowMs <= 2^50), so the arithmetic is exact, and they are written with `struct.pack('d')` and
 * answered as integers, never through `tostring`.
 *
 * A batch pays a call's fixed cost, TIME and the policies once, and each key's GET and SET once however often the
 * key appears (costs: BENCHMARKS.md, section "Redis CPU per decision: the consume script and its pieces"). One
 * packed value rather than a hash per key, and SET … PX rather than KEEPTTL, so a key that lost its TTL gets one
 * back. The bans part of a record is read only when the record has one.
 */
export const CONSUME_LUA = `
local call, tonumber, sub, byte, max = redis.call, tonumber, string.sub, string.byte, math.max
local unpackStruct, packStruct = struct.unpack, struct.pack
local ceil, floor = math.ceil, math.floor
local ALGORITHMS = { sliding = 1, gcra = 2 }
local serverTime = ARGV[1] == 'server'
local t = call('TIME')
local clock = t[1] * 1000 + math.floor(t[2] / 1000)
-- The caller gave up on this batch: charge nothing.
if clock >= tonumber(ARGV[2]) then return { clock, -1 } end
local now = serverTime and clock or 0

-- policies[p] = { signature, format, { n, banThreshold, banInterval, banDuration, limits…, windowMs…
-- [, algorithms…] }, the n algorithms (0 fixed, 1 sliding, 2 gcra) or false when all are fixed, the reply's
-- numbers per consume after its outcome and ban end (n, or 3n with an algorithm other than fixed) }
local policyCount = tonumber(ARGV[3])
local policies = {}
for p = 1, policyCount do
  local numbers = cjson.decode(ARGV[3 * p + 3])
  local n, algs = numbers[1], false
  if #numbers > 4 + 2 * n then
    algs = {}
    for i = 1, n do algs[i] = numbers[4 + 2 * n + i] end
  end
  policies[p] = { ARGV[3 * p + 1], ARGV[3 * p + 2], numbers, algs, algs and 3 * n or n }
end

-- A record: { sig, format, st = { n, #sig, starts…, counts… }, bans = { subject, rejection start,
-- rejection count, ban end, subject, … } (4 slots per ban subject), the stored windows decoded (only when they
-- are not the policy's), the windows' algorithms (false when all are fixed), their previous counts (sliding; 0
-- for the others) }.
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
  local stored, algs, prev = false, false, false
  if sig ~= policy[1] then
    stored = cjson.decode(sig)
    for j = 1, n do
      local window = stored[j]
      if type(window[1]) ~= 'string' or type(window[2]) ~= 'number' or type(window[3]) ~= 'number' then error('not a signature') end
      if window[4] ~= nil then
        algs = algs or {}
        algs[j] = ALGORITHMS[window[4]] or error('not a signature')
      end
    end
    if algs then for j = 1, n do algs[j] = algs[j] or 0 end end
  else
    algs = policy[4]
  end
  if algs then
    -- The previous counts of the sliding windows follow the signature.
    prev = {}
    for j = 1, n do
      if algs[j] == 1 then prev[j], to = unpackStruct('<d', value, to) else prev[j] = 0 end
    end
  end
  local bans, b = {}, 0
  while to <= #value do
    local rejectedStart, rejectedCount, bannedUntil, length, at = unpackStruct('<dddI4', value, to)
    to = at + length
    bans[b + 1], bans[b + 2], bans[b + 3], bans[b + 4] = sub(value, at, to - 1), rejectedStart, rejectedCount, bannedUntil
    b = b + 4
  end
  if to ~= #value + 1 then error('truncated') end
  return { sig, format, st, bans, stored, algs, prev }
end

local function encode(record)
  local bans = record[4]
  local parts = { packStruct(record[2], unpack(record[3])), record[1] }
  local algs = record[6]
  if algs then
    for j = 1, #algs do
      if algs[j] == 1 then parts[#parts + 1] = packStruct('<d', record[7][j]) end
    end
  end
  for b = 1, #bans, 4 do
    parts[#parts + 1] = packStruct('<dddI4', bans[b + 1], bans[b + 2], bans[b + 3], #bans[b])
    parts[#parts + 1] = bans[b]
  end
  return table.concat(parts)
end

-- The sliding and gcra windows (core: rate-limit/window-algorithms.ts), in unit-milliseconds (units × windowMs):
-- whole numbers below 2^53 while limit × windowMs <= 2^50, so every operation here is exact, as in JavaScript.
-- What a stored counter (algorithm a: 0 fixed, 1 sliding, 2 gcra) holds at t, read with its own limit and length.
local function heldOf(a, windowMs, limit, startMs, count, prev, t)
  if a == 2 then
    local drained = limit * max(0, t - startMs)
    if count > drained then return count - drained end
    return 0
  end
  local start = t - t % windowMs
  if startMs == start then
    if a == 1 then return prev * (windowMs - (t - start)) + count * windowMs end
    return count * windowMs
  end
  if a == 1 and startMs == start - windowMs then return count * (windowMs - (t - start)) end
  return 0
end

-- When a counter ends: fixed its window's end; sliding the next window's; gcra its theoretical arrival time.
local function endOf(a, windowMs, limit, startMs, count)
  if a == 0 then return startMs + windowMs end
  if a == 1 then return startMs + 2 * windowMs end
  if limit > 0 then return startMs + ceil(count / limit) end
  return startMs
end

-- Carried counters of the windows (start, count, previous count), one consume at a time.
local starts, counts, prevs = {}, {}, {}

-- Carries every window of the policy to now (counterAt of the core), converting a counter another algorithm
-- wrote for the same length; fills starts, counts, prevs. Returns whether every window has room for cost.
local function carry(record, policy, cost, now, same, stored, index, names)
  local numbers, algs, storedAlgs = policy[3], policy[4], record[6]
  local n, st = numbers[1], record[3]
  local storedN = st[1]
  local hasRoom = true
  for i = 1, n do
    local limit, windowMs = numbers[4 + i], numbers[4 + n + i]
    local a = algs and algs[i] or 0
    local start = now - (now % windowMs)
    local j = i
    if not same then j = index and index[names[i][1]] end
    local sa, sW, sL, ss, sc, sp = 0, 0, 0, 0, 0, 0
    if j then
      sa, ss, sc = storedAlgs and storedAlgs[j] or 0, st[2 + j], st[2 + storedN + j]
      if same then sW, sL = windowMs, limit else sW, sL = stored[j][3], stored[j][2] end
      if sa == 1 then sp = record[7][j] end
    end
    local sameWindow = j and sW == windowMs
    local cs, cc, cp = start, 0, 0
    if a == 0 and sa == 0 then
      -- fixed over fixed (or nothing): the count of the current window
      if sameWindow and ss == start then cc = sc end
      if cc + cost > limit then hasRoom = false end
    else
      if a == 2 and sameWindow and sa == 2 then
        -- A counter charged later than now (another instance's clock ahead) is read at its own time.
        cs = max(now, ss)
        cc = heldOf(2, windowMs, sL, ss, sc, 0, cs)
      elseif a == 1 and sameWindow and sa == 1 then
        if ss == start then cc, cp = sc, sp elseif ss == start - windowMs then cp = sc end
      else
        -- Another algorithm wrote it: the units it holds now, rounded up; another length: nothing.
        local units = 0
        if sameWindow then units = ceil(heldOf(sa, windowMs, sL, ss, sc, sp, now) / windowMs) end
        if a == 2 then cs, cc = now, units * windowMs else cc = units end
      end
      local held
      if a == 2 then held = cc elseif a == 1 then held = cp * (windowMs - (now - cs)) + cc * windowMs else held = cc * windowMs end
      -- A cost above the limit never fits (and is not multiplied: it may be any safe integer).
      if cost > limit or held + cost * windowMs > limit * windowMs then hasRoom = false end
    end
    starts[i], counts[i], prevs[i] = cs, cc, cp
  end
  return hasRoom
end

-- Fills used with each window's used, reset and retry (-1: none) from the carried counters (windowUsage of the core);
-- retry only when refused, for a sliding or gcra window with less left than cost, cost within its limit.
local function windowUsage(policy, cost, now, refused, used)
  local numbers, algs = policy[3], policy[4]
  local n = numbers[1]
  for i = 1, n do
    local limit, windowMs, a = numbers[4 + i], numbers[4 + n + i], algs[i]
    local cs, cc, cp = starts[i], counts[i], prevs[i]
    local held
    if a == 2 then held = cc elseif a == 1 then held = cp * (windowMs - (now - cs)) + cc * windowMs else held = cc * windowMs end
    local u = ceil(held / windowMs)
    local reset
    if a == 1 and cc == 0 then reset = cs + windowMs else reset = endOf(a, windowMs, limit, cs, cc) end
    local retry = -1
    if refused and a ~= 0 and limit - u < cost and cost <= limit then
      if a == 2 then
        local excess = cc + cost * windowMs - limit * windowMs
        retry = cs
        if excess > 0 then retry = cs + ceil(excess / limit) end
      else
        -- sliding: the previous window's weight falls by cp per ms until the window ends; then the current window
        -- becomes the previous one and its count falls likewise.
        local roomNow = (limit - cc - cost) * windowMs
        if roomNow >= 0 then
          local atMs = cs
          if cp ~= 0 then atMs = cs + windowMs - floor(roomNow / cp) end
          if atMs < cs + windowMs then retry = max(now, atMs) end
        end
        if retry == -1 then
          retry = cs + windowMs
          if cc ~= 0 then retry = retry + max(0, windowMs - floor(((limit - cost) * windowMs) / cc)) end
        end
      end
    end
    used[3 * i - 2], used[3 * i - 1], used[3 * i] = u, reset, retry
  end
end

-- Decides one consume at now for subject on record (changed in place unless banned). Fills used with the count
-- of each window (after the charge when admitted), or with a policy that has a sliding or gcra window, each
-- window's used, reset and retry. Returns outcome, ban end, whether the record changed, and until when (epoch ms)
-- the record matters.
local function decide(record, policy, cost, subject, now, used)
  local sig, numbers = policy[1], policy[3]
  local n, banThreshold, banInterval = numbers[1], numbers[2], numbers[3]
  local st, bans = record[3], record[4]
  local same = record[1] == sig
  local algs, storedAlgs = policy[4], record[6]
  local stored, storedN, index, names
  if not same and record[1] then
    -- Other windows stored: a count carries over by name, when the window's length is the same.
    stored, storedN, index, names = record[5] or cjson.decode(record[1]), st[1], {}, cjson.decode(sig)
    for j = 1, storedN do index[stored[j][1]] = j end
  end
  local hasRoom = true
  if algs or storedAlgs then
    hasRoom = carry(record, policy, cost, now, same, stored, index, names)
  else
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
  end

  local own = 0
  for b = 1, #bans, 4 do
    if bans[b] == subject then own = b break end
  end
  if own > 0 and bans[own + 3] > now then
    -- Banned: nothing changes; the record matters until the latest end of what it holds.
    local at = now
    for j = 1, st[1] do
      if storedAlgs then
        local a, windowMs, limit = storedAlgs[j], numbers[4 + n + j], numbers[4 + j]
        if not same then windowMs, limit = stored[j][3], stored[j][2] end
        at = max(at, endOf(a, windowMs, limit, st[2 + j], st[2 + st[1] + j]))
      else
        local windowMs = same and numbers[4 + n + j] or stored[j][3]
        at = max(at, st[2 + j] + windowMs)
      end
    end
    for b = 1, #bans, 4 do
      at = max(at, bans[b + 3])
      if banThreshold > 0 and bans[b + 2] > 0 then at = max(at, bans[b + 1] + banInterval) end
    end
    if algs then windowUsage(policy, cost, now, true, used) elseif storedAlgs then for i = 1, n do used[i] = counts[i] end end
    return 2, bans[own + 3], false, at
  end

  -- The windows of this request, charged when every one has room for the cost.
  if not same then
    st = { n, #sig }
    record[1], record[2], record[3], record[5] = sig, policy[2], st, false
  end
  local at = now
  if algs or storedAlgs then
    for i = 1, n do
      local a = algs and algs[i] or 0
      if hasRoom then
        if a == 2 then counts[i] = counts[i] + cost * numbers[4 + n + i] else counts[i] = counts[i] + cost end
      end
      st[2 + i], st[2 + n + i] = starts[i], counts[i]
      at = max(at, endOf(a, numbers[4 + n + i], numbers[4 + i], starts[i], counts[i]))
    end
    if algs then
      local prev = {}
      for i = 1, n do prev[i] = prevs[i] end
      windowUsage(policy, cost, now, not hasRoom, used)
      record[6], record[7] = algs, prev
    else
      for i = 1, n do used[i] = counts[i] end
      record[6], record[7] = false, false
    end
  else
    for i = 1, n do
      if hasRoom then used[i] = used[i] + cost end
      st[2 + i], st[2 + n + i] = starts[i], used[i]
      at = max(at, starts[i] + numbers[4 + n + i])
    end
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
  local n = policy[5]
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
