-- Bucket items. One hash per (entity, resource, shard):
--   rf   refill timestamp (epoch ms), the optimistic lock of normal writes
--   sc   shard count         cas  cascade ("1" or "0")   par  parent id
--   ttl  expiry time (epoch s, the limiter's clock; "0": none)
--   tk:L cp:L ra:L rp:L tc:L  balance, capacity, refill amount (millitokens),
--                             refill period (ms), total consumed, of limit L
-- The key's own Redis expiry (PEXPIRE) is set to the same lifetime
-- relative to the write, so an idle bucket disappears from Redis.

local FIELDS = {'tk', 'cp', 'ra', 'rp', 'tc'}

local function field(f, name) return f .. ':' .. name end

local function has_limit(key, name)
  return redis.call('HEXISTS', key, field('cp', name)) == 1
end

local function get(key, f, name)
  return redis.call('HGET', key, field(f, name))
end

local function set_limit(key, name, tk, tc, cp, ra, rp)
  redis.call('HSET', key, field('tk', name), tk, field('tc', name), tc,
    field('cp', name), cp, field('ra', name), ra, field('rp', name), rp)
end

local function del_limit(key, name)
  for _, f in ipairs(FIELDS) do redis.call('HDEL', key, field(f, name)) end
end

-- limit names held by the item
local function limit_names(key)
  local out = {}
  for _, k in ipairs(redis.call('HKEYS', key)) do
    if string.sub(k, 1, 3) == 'cp:' then out[#out + 1] = string.sub(k, 4) end
  end
  return out
end

-- apply_ttl applies a write's TTL mode: 's' sets the expiry time (epoch s)
-- and the key's lifetime (ms), 'r' removes both, anything else keeps them.
local function apply_ttl(key, mode, abs, rel)
  if mode == 's' then
    redis.call('HSET', key, 'ttl', abs)
    redis.call('PEXPIRE', key, rel)
  elseif mode == 'r' then
    redis.call('HSET', key, 'ttl', '0')
    redis.call('PERSIST', key)
  end
end

-- expired reports whether the item's TTL has passed at now (epoch ms).
local function expired(key, now)
  local ttl = redis.call('HGET', key, 'ttl')
  if not ttl or ttl == '0' then return false end
  -- ttl <= floor(now / 1000)
  if small(ttl) and small(now) then
    return tonumber(ttl) <= math.floor(tonumber(now) / 1000)
  end
  local z = big()
  local q = z.bdivmod(z.parse(now), z.parse('1000'))
  return z.bcmp(z.parse(ttl), q) <= 0
end
