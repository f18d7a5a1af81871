-- Write identifiers: a call that changes balances (a consume, a write)
-- names, as its last key, a key of its own (in the slot of its items,
-- named after a random identifier the client draws for the call). go-redis
-- resends a command whose connection broke before the reply, after the
-- script may have run: when the call applied, the script leaves that key,
-- for WRITE_ID_TTL_MS, holding what it applied, and a resent call finds it
-- and answers from it instead of applying again.

local WRITE_ID_TTL_MS = 10000

-- write_id_seen returns what the call of identifier key applied ('1', or
-- one flag per request for consume_each), or nil when it applied nothing
-- or was never run.
local function write_id_seen(key)
  local v = redis.call('GET', key)
  if v then return v end
  return nil
end

-- write_id_keep records that the call of identifier key applied v.
local function write_id_keep(key, v)
  redis.call('SET', key, v, 'PX', WRITE_ID_TTL_MS)
end
