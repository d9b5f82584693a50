/**
 * The Lua scripts of the API-key record store (see api-key-record-store.ts for the key layout). Every script
 * takes KEYS[1] = the global index `${base}all` (whose name, less its last three characters, is the base every
 * other key name is built from inside the script, client-level ioredis `keyPrefix` included) and KEYS[2] = the
 * key the call is about. Every key a script touches carries the store's hash tag, so on a Redis Cluster they all
 * live in the slot of KEYS[1].
 *
 * Values are kept as Redis strings exactly as the store sends them (decimal integers, lowercase hex digests,
 * UTF-8 text): the scripts never do arithmetic on them, so no number is rounded by Lua.
 */

/** The record hash's fields, in the order every script answers them (`HMGET`). */
export const RECORD_FIELDS = [
  'accountId',
  'plan',
  'requestsPerMinute',
  'requestsPerDay',
  'name',
  'createdAtMs',
  'updatedAtMs',
  'expiresAtMs',
  'revokedAtMs',
  'digest',
  'previousDigest',
  'previousValidUntilMs',
] as const;

/** The prelude of every script: the key base, and a reader of one record's fields. */
const PRELUDE = `
local base = string.sub(KEYS[1], 1, -4)
local FIELDS = { ${RECORD_FIELDS.map((field) => `'${field}'`).join(', ')} }
local function read(recordKey)
  return redis.call('HMGET', recordKey, unpack(FIELDS))
end
local function digestKey(hex)
  return base .. 'digest:' .. hex
end
`;

/**
 * The prelude of the three mutation scripts (KEYS[2] = the record; ARGV[1] = the channel, ARGV[2] = the keyId):
 * `publish(…)` sends the digests it is given (nils skipped) as one message, hex joined by commas;
 * `dropIndex(hex)` deletes a digest's index entry if it points at this record.
 */
const MUTATION_PRELUDE = `${PRELUDE}
local function publish(...)
  local digests = {}
  for i = 1, select('#', ...) do
    local hex = select(i, ...)
    if hex then digests[#digests + 1] = hex end
  end
  redis.call('PUBLISH', ARGV[1], table.concat(digests, ','))
end
local function dropIndex(hex)
  if hex and redis.call('GET', digestKey(hex)) == ARGV[2] then redis.call('DEL', digestKey(hex)) end
end
`;

/**
 * Create. KEYS[2] = the new record; ARGV[1] = channel, ARGV[2] = keyId, ARGV[3] = maxRecords ('' for none),
 * ARGV[4] = accountId, ARGV[5] = digest (hex), ARGV[6] = previous digest (hex, '' for none), ARGV[7…] = the
 * record's field/value pairs. Answers 1 when the keyId exists, 2 when a digest is indexed already, 3 when the
 * store holds maxRecords live records (all before any write), else writes the record, its digest index entries and both
 * list indexes, publishes its digests and answers 0.
 */
export const CREATE_API_KEY_LUA = `${MUTATION_PRELUDE}
-- The live records (neither revoked nor expired at the new record's createdAtMs): maxRecords bounds those only.
-- A scan of every record, so only run when the store holds maxRecords in all. Times compare as Lua numbers
-- (doubles: exact for any epoch ms).
local function countLive()
  local nowMs
  for i = 7, #ARGV, 2 do
    if ARGV[i] == 'createdAtMs' then nowMs = tonumber(ARGV[i + 1]) end
  end
  local live = 0
  for _, keyId in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local state = redis.call('HMGET', base .. 'record:' .. keyId, 'revokedAtMs', 'expiresAtMs')
    if not state[1] and (not state[2] or tonumber(state[2]) > nowMs) then live = live + 1 end
  end
  return live
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 1 end
if redis.call('EXISTS', digestKey(ARGV[5])) == 1 then return 2 end
local previous = false
if ARGV[6] ~= '' then
  previous = ARGV[6]
  if redis.call('EXISTS', digestKey(previous)) == 1 then return 2 end
end
if ARGV[3] ~= '' and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) and countLive() >= tonumber(ARGV[3]) then return 3 end
redis.call('HSET', KEYS[2], unpack(ARGV, 7))
redis.call('SET', digestKey(ARGV[5]), ARGV[2])
if previous then redis.call('SET', digestKey(previous), ARGV[2]) end
redis.call('ZADD', KEYS[1], 0, ARGV[2])
redis.call('ZADD', base .. 'account:' .. ARGV[4], 0, ARGV[2])
publish(ARGV[5], previous)
return 0
`;

/**
 * Update plan, limits, name. KEYS[2] = the record; ARGV[1] = channel, ARGV[2] = keyId, ARGV[3] = nowMs,
 * ARGV[4] = plan ('' keeps it), ARGV[5] = limits ('' keeps them, 'clear', 'set' with ARGV[6] requests per
 * minute and ARGV[7] per day), ARGV[8] = name ('' keeps it, 'clear', 'set' with ARGV[9] the name).
 * Answers {} when there is no record; the record's fields unchanged when it is revoked; else applies the
 * change, sets updatedAtMs, publishes the current and previous digests and answers the fields after it.
 */
export const UPDATE_API_KEY_LUA = `${MUTATION_PRELUDE}
if redis.call('EXISTS', KEYS[2]) == 0 then return {} end
local state = redis.call('HMGET', KEYS[2], 'revokedAtMs', 'digest', 'previousDigest')
if state[1] then return read(KEYS[2]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[2], 'plan', ARGV[4]) end
if ARGV[5] == 'set' then
  redis.call('HSET', KEYS[2], 'requestsPerMinute', ARGV[6], 'requestsPerDay', ARGV[7])
elseif ARGV[5] == 'clear' then
  redis.call('HDEL', KEYS[2], 'requestsPerMinute', 'requestsPerDay')
end
if ARGV[8] == 'set' then
  redis.call('HSET', KEYS[2], 'name', ARGV[9])
elseif ARGV[8] == 'clear' then
  redis.call('HDEL', KEYS[2], 'name')
end
redis.call('HSET', KEYS[2], 'updatedAtMs', ARGV[3])
publish(state[2], state[3])
return read(KEYS[2])
`;

/**
 * Rotate. KEYS[2] = the record; ARGV[1] = channel, ARGV[2] = keyId, ARGV[3] = nowMs, ARGV[4] = the new digest
 * (hex), ARGV[5] = previousValidUntilMs. Answers {} when there is no record; the fields unchanged when it is
 * revoked; the number 2 when the new digest is indexed already (nothing written); else drops the older previous
 * digest (field and index entry), moves the current digest to previousDigest, indexes the new one, publishes
 * all three and answers the fields after it.
 */
export const ROTATE_API_KEY_LUA = `${MUTATION_PRELUDE}
if redis.call('EXISTS', KEYS[2]) == 0 then return {} end
local state = redis.call('HMGET', KEYS[2], 'revokedAtMs', 'digest', 'previousDigest')
if state[1] then return read(KEYS[2]) end
if redis.call('EXISTS', digestKey(ARGV[4])) == 1 then return 2 end
dropIndex(state[3])
redis.call('SET', digestKey(ARGV[4]), ARGV[2])
redis.call('HSET', KEYS[2], 'digest', ARGV[4], 'previousDigest', state[2], 'previousValidUntilMs', ARGV[5], 'updatedAtMs', ARGV[3])
publish(state[3], state[2], ARGV[4])
return read(KEYS[2])
`;

/**
 * Revoke. KEYS[2] = the record; ARGV[1] = channel, ARGV[2] = keyId, ARGV[3] = nowMs. Answers {} when there is
 * no record; the fields unchanged when it is revoked already (the first revocation's time stays); else sets
 * revokedAtMs and updatedAtMs, drops the previous digest (fields and index entry; the current digest stays
 * indexed so the record is still found, revoked), publishes both digests and answers the fields after it.
 */
export const REVOKE_API_KEY_LUA = `${MUTATION_PRELUDE}
if redis.call('EXISTS', KEYS[2]) == 0 then return {} end
local state = redis.call('HMGET', KEYS[2], 'revokedAtMs', 'digest', 'previousDigest')
if state[1] then return read(KEYS[2]) end
dropIndex(state[3])
redis.call('HSET', KEYS[2], 'revokedAtMs', ARGV[3], 'updatedAtMs', ARGV[3])
redis.call('HDEL', KEYS[2], 'previousDigest', 'previousValidUntilMs')
publish(state[2], state[3])
return read(KEYS[2])
`;

/**
 * Find by digest. KEYS[2] = the digest's index entry. Answers {} when there is none, else { keyId, fields }.
 * One round trip for a lookup (a GET and an HMGET would be two).
 */
export const FIND_API_KEY_BY_DIGEST_LUA = `${PRELUDE}
local keyId = redis.call('GET', KEYS[2])
if not keyId then return {} end
return { keyId, read(base .. 'record:' .. keyId) }
`;

/**
 * One page of a list. KEYS[2] = the index read (the global one, or an account's); ARGV[1] = '(' .. the keyId
 * after which the page starts, or '-' for the first page; ARGV[2] = how many records at most. Answers
 * { keyId1, fields1, keyId2, fields2, … } in keyId order (byte order, ZRANGEBYLEX).
 */
export const LIST_API_KEYS_LUA = `${PRELUDE}
local keyIds = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
local page = {}
for _, keyId in ipairs(keyIds) do
  page[#page + 1] = keyId
  page[#page + 1] = read(base .. 'record:' .. keyId)
end
return page
`;

/**
 * One batch of a purge. KEYS[2] = the global index again; ARGV[1] = channel, ARGV[2] = beforeMs, ARGV[3] = '(' ..
 * the keyId after which the batch starts, or '-' for the first; ARGV[4] = how many keyIds at most. Removes each
 * record of the batch revoked or expired at or before beforeMs (its hash, its digests' index entries that point at
 * it, its entries in both list indexes), publishes their digests as one message and answers { removed, last },
 * `last` the batch's last keyId ('' when the batch was the index's end).
 */
export const PURGE_API_KEYS_LUA = `${PRELUDE}
local beforeMs = tonumber(ARGV[2])
local keyIds = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[3], '+', 'LIMIT', 0, tonumber(ARGV[4]))
local digests = {}
local removed = 0
for _, keyId in ipairs(keyIds) do
  local recordKey = base .. 'record:' .. keyId
  local state = redis.call('HMGET', recordKey, 'accountId', 'revokedAtMs', 'expiresAtMs', 'digest', 'previousDigest')
  if (state[2] and tonumber(state[2]) <= beforeMs) or (state[3] and tonumber(state[3]) <= beforeMs) then
    for i = 4, 5 do
      local hex = state[i]
      if hex then
        digests[#digests + 1] = hex
        if redis.call('GET', digestKey(hex)) == keyId then redis.call('DEL', digestKey(hex)) end
      end
    end
    redis.call('DEL', recordKey)
    redis.call('ZREM', KEYS[1], keyId)
    if state[1] then redis.call('ZREM', base .. 'account:' .. state[1], keyId) end
    removed = removed + 1
  end
end
if #digests > 0 then redis.call('PUBLISH', ARGV[1], table.concat(digests, ',')) end
local last = ''
if #keyIds == tonumber(ARGV[4]) then last = keyIds[#keyIds] end
return { removed, last }
`;
