-- Speculative consumption from KEYS (one request per item), all or none:
-- each request takes its amounts (millitokens) without refilling when the
-- item exists, has not expired, stores every resolved limit with exactly
-- the resolved parameters, holds every limit named, and covers every
-- positive amount. Each item is read once (HGETALL) and written once
-- (HSET). Returns {applied, the reason of each request, then each item
-- as its fields and values joined by newlines ("" when missing)}: as
-- written when applied, as they were when not.

local reqs = {}
for r = 1, #KEYS do
  local q = {key = KEYS[r], now = nxt(), limits = {}, consume = {}}
  for _ = 1, nxtn() do
    q.limits[#q.limits + 1] = {name = nxt(), cp = nxt(), ra = nxt(), rp = nxt()}
  end
  for _ = 1, nxtn() do
    q.consume[#q.consume + 1] = {name = nxt(), amount = nxt()}
  end
  -- flat: the HGETALL reply; at[field]: the index of its value in flat
  local flat = redis.call('HGETALL', q.key)
  local at = {}
  for i = 1, #flat, 2 do at[flat[i]] = i + 1 end
  q.flat, q.at = flat, at
  reqs[r] = q
end

local function val(q, f)
  local i = q.at[f]
  return i and q.flat[i]
end

local function refusal(q)
  if #q.flat == 0 then return 'bucket_missing' end
  local ttl = val(q, 'ttl')
  if ttl and ttl ~= '0' then
    local gone
    if small(ttl) and small(q.now) then
      gone = tonumber(ttl) <= math.floor(tonumber(q.now) / 1000)
    else
      local z = big()
      gone = z.bcmp(z.parse(ttl), (z.bdivmod(z.parse(q.now), z.parse('1000')))) <= 0
    end
    if gone then return 'bucket_expired' end
  end
  for _, l in ipairs(q.limits) do
    local cp = val(q, 'cp:' .. l.name)
    if not cp then return 'limit_missing' end
    if cp ~= l.cp or val(q, 'ra:' .. l.name) ~= l.ra or val(q, 'rp:' .. l.name) ~= l.rp then return 'limits_changed' end
  end
  local short = false
  for _, c in ipairs(q.consume) do
    local tk = val(q, 'tk:' .. c.name)
    if not tk or not val(q, 'cp:' .. c.name) then return 'limit_missing' end
    if c.amount ~= '0' and string.sub(c.amount, 1, 1) ~= '-' and icmp(tk, c.amount) < 0 then short = true end
  end
  if short then return 'app_limit_exhausted' end
  return ''
end

-- put sets field f of q's item to v, in flat and in the write.
local function put(q, set, f, v)
  local i = q.at[f]
  if i then
    q.flat[i] = v
  else
    q.flat[#q.flat + 1] = f
    q.flat[#q.flat + 1] = v
    q.at[f] = #q.flat
  end
  set[#set + 1] = f
  set[#set + 1] = v
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
    local set = {}
    for _, c in ipairs(q.consume) do
      if c.amount ~= '0' then
        put(q, set, 'tk:' .. c.name, isub(val(q, 'tk:' .. c.name), c.amount))
        put(q, set, 'tc:' .. c.name, iadd(val(q, 'tc:' .. c.name) or '0', c.amount))
      end
    end
    if #set > 0 then redis.call('HSET', q.key, unpack(set)) end
  end
end
for _, q in ipairs(reqs) do
  out[#out + 1] = table.concat(q.flat, '\n')
end
return out
