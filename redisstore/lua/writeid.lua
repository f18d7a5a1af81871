-- Write identifiers: a call that changes balances (a consume, a write)
-- carries an identifier the client draws for it (its first argument) and
-- names, as its last key, the hash of the identifiers of its slot's calls
-- in the tenth of a second the client sent it (in the slot of its items).
-- go-redis resends a command whose connection broke before the reply,
-- after the script may have run: when the call applied, the script leaves
-- its identifier in that hash, holding what it applied, and a resent call
-- (the same key, the same identifier) finds it and answers from it instead
-- of applying again.
--
-- An identifier costs a field of a hash, not a key of its own: no key to
-- create and no expiry per call. A call that records '1' (a consume of
-- all or none, a write) decides first and then records its identifier
-- with one HSET, whose count of new fields tells both whether the
-- identifier was there already (the call applied before: it applies
-- nothing now) and whether the hash is new (its marker '#' is new too);
-- a call that would not apply asks only whether its identifier is there
-- (HEXISTS). A batch of requests, which records a flag per request, reads
-- (HMGET, which also tells whether the hash exists) and then writes (one
-- HSET). The hash expires as a whole
-- WRITE_ID_TTL_MS after its first call, past the end of its tenth of a
-- second: every identifier is kept at least 10 s, and a hash holds a tenth
-- of a second of calls, so its expiry frees little at once.

--
-- A client that never resends (see Store.resends) sends the empty
-- identifier, and one of the call's items as the hash's key: each call is
-- sent once, so there is nothing to record or look up, and every function
-- below answers as for a call never seen, without touching that key.

local WRITE_ID_TTL_MS = 10200

-- write_id_seen returns what the call of identifier id (in hash key)
-- applied ('1', or one flag per request for consume_each), or nil when it
-- applied nothing or was never run; and whether the hash is new (holds no
-- identifier yet), for write_id_keep.
local function write_id_seen(key, id)
  if id == '' then return nil, false end
  local v = redis.call('HMGET', key, id, '#')
  return v[1] or nil, not v[2]
end

-- write_id_keep records in hash key that the call of identifier id
-- applied v; fresh (from write_id_seen) gives a new hash its marker field
-- and its lifetime.
local function write_id_keep(key, id, v, fresh)
  if id == '' then return end
  if fresh then
    redis.call('HSET', key, id, v, '#', '1')
    redis.call('PEXPIRE', key, WRITE_ID_TTL_MS)
  else
    redis.call('HSET', key, id, v)
  end
end

-- write_id_claim records in hash key that the call of identifier id
-- applied ('1'), and reports whether it had applied before (the
-- identifier was there: the call must not apply again). A new hash (its
-- marker new too) gets its lifetime.
local function write_id_claim(key, id)
  if id == '' then return false end
  local added = redis.call('HSET', key, id, '1', '#', '1')
  if added == 2 then redis.call('PEXPIRE', key, WRITE_ID_TTL_MS) end
  return added == 0
end

-- write_id_applied reports whether the call of identifier id applied
-- before (for a call that would not apply now).
local function write_id_applied(key, id)
  if id == '' then return false end
  return redis.call('HEXISTS', key, id) == 1
end
