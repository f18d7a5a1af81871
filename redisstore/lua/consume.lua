-- Speculative consumption from KEYS (one request per item), all or none:
-- each request takes its amounts (millitokens) without refilling when the
-- item exists, has not expired, stores every resolved limit with exactly
-- the resolved parameters, holds every limit named, and covers every
-- positive amount. Returns {applied, reason of each request, then each
-- item as HGETALL preceded by its field count (0: missing)}; the items
-- are as written when applied, as they were when not.

local reqs = {}
for r = 1, #KEYS do
  local q = {key = KEYS[r], now = nxt(), limits = {}, consume = {}}
  for _ = 1, nxtn() do
    q.limits[#q.limits + 1] = {name = nxt(), cp = nxt(), ra = nxt(), rp = nxt()}
  end
  for _ = 1, nxtn() do
    q.consume[#q.consume + 1] = {name = nxt(), amount = nxt()}
  end
  reqs[r] = q
end

local function refusal(q)
  local key = q.key
  if redis.call('EXISTS', key) == 0 then return 'bucket_missing' end
  if expired(key, q.now) then return 'bucket_expired' end
  for _, l in ipairs(q.limits) do
    local v = redis.call('HMGET', key, field('cp', l.name), field('ra', l.name), field('rp', l.name))
    if not v[1] then return 'limit_missing' end
    if v[1] ~= l.cp or v[2] ~= l.ra or v[3] ~= l.rp then return 'limits_changed' end
  end
  local short = false
  for _, c in ipairs(q.consume) do
    local tk = get(key, 'tk', c.name)
    if not tk or not has_limit(key, c.name) then return 'limit_missing' end
    if icmp(c.amount, '0') > 0 and icmp(tk, c.amount) < 0 then short = true end
  end
  if short then return 'app_limit_exhausted' end
  return ''
end

local out = {0}
local refused = false
for r, q in ipairs(reqs) do
  local why = refusal(q)
  out[r + 1] = why
  if why ~= '' then refused = true end
end
if not refused then
  out[1] = 1
  for _, q in ipairs(reqs) do
    for _, c in ipairs(q.consume) do
      if c.amount ~= '0' then
        redis.call('HSET', q.key, field('tk', c.name), isub(get(q.key, 'tk', c.name), c.amount),
          field('tc', c.name), iadd(get(q.key, 'tc', c.name) or '0', c.amount))
      end
    end
  end
end
for _, q in ipairs(reqs) do
  local h = redis.call('HGETALL', q.key)
  out[#out + 1] = #h
  for _, v in ipairs(h) do out[#out + 1] = v end
end
return out
