-- Bucket items. One hash per (entity, resource, shard), with one field
-- for the item and one per limit, each a '|'-separated record (ids and
-- names hold no '|'):
--   h     rf|sc|cas|ttl|par   refill timestamp (epoch ms, the optimistic
--         lock of normal writes), shard count, cascade ("1"/"0"), expiry
--         time (epoch s on the limiter's clock; "0": none), parent id
--   l:L   cp|ra|rp|tk|tc      capacity, refill amount (millitokens), refill
--         period (ms), balance and total consumed of limit L (parameters
--         first: the speculative consume compares them as a prefix)
--   i     incarnation         the random id the item was created with
--         (store.Bucket.Incarnation); absent: none ("0")
-- The key's own Redis expiry (PEXPIRE) is set to the same lifetime,
-- relative to the write, so an idle bucket disappears from Redis.

local function parse_header(v)
  local rf, sc, cas, ttl, par = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  return {rf = rf, sc = sc, cas = cas, ttl = ttl, par = par}
end

local function header_string(h)
  return h.rf .. '|' .. h.sc .. '|' .. h.cas .. '|' .. h.ttl .. '|' .. h.par
end

local function parse_limit(v)
  local cp, ra, rp, tk, tc = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  return {tk = tk, tc = tc, cp = cp, ra = ra, rp = rp}
end

local function limit_string(l)
  return l.cp .. '|' .. l.ra .. '|' .. l.rp .. '|' .. l.tk .. '|' .. l.tc
end

-- load reads an item: nil when it is missing, else {h = header, l = {name
-- = limit}, set = {}, del = {}}; set and del collect what save writes.
local function load(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local it = {key = key, l = {}, set = {}, del = {}}
  for i = 1, #flat, 2 do
    local f = flat[i]
    if f == 'h' then
      it.h = parse_header(flat[i + 1])
    elseif f == 'i' then
      it.inc = flat[i + 1]
    elseif string.sub(f, 1, 2) == 'l:' then
      it.l[string.sub(f, 3)] = parse_limit(flat[i + 1])
    end
  end
  if not it.h then it.h = {rf = '0', sc = '1', cas = '0', ttl = '0', par = ''} end
  return it
end

-- touch marks limit name (or the header, name nil) as changed.
local function touch(it, name)
  it.set[name or true] = true
end

-- save writes the changed fields of it and deletes its removed limits.
local function save(it)
  local args = {}
  for name in pairs(it.set) do
    if name == true then
      args[#args + 1] = 'h'; args[#args + 1] = header_string(it.h)
    elseif it.l[name] then
      args[#args + 1] = 'l:' .. name; args[#args + 1] = limit_string(it.l[name])
    end
  end
  if it.newinc then args[#args + 1] = 'i'; args[#args + 1] = it.inc end
  if #args > 0 then redis.call('HSET', it.key, unpack(args)) end
  for name in pairs(it.del) do redis.call('HDEL', it.key, 'l:' .. name) end
end

-- apply_ttl applies a write's TTL mode to item it: 's' sets the expiry
-- time (epoch s) and the key's lifetime (ms), 'r' removes both, anything
-- else keeps them.
local function apply_ttl(it, mode, abs, rel)
  if mode == 's' then
    it.h.ttl = abs
    touch(it)
    it.pexpire = rel
  elseif mode == 'r' then
    it.h.ttl = '0'
    touch(it)
    it.persist = true
  end
end
