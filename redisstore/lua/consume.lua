-- Speculative consumption from KEYS (one request per item), all or none:
-- each request takes its amounts (millitokens) without refilling when the
-- item exists, has not expired, stores every resolved limit with exactly
-- the resolved parameters, holds every limit named, and covers every
-- positive amount. Each item is read once (HGETALL) and written once
-- (HSET). Returns {applied, the reason of each request, then each item
-- as its fields and values joined by newlines ("" when missing)}: as
-- written when applied, as they were when not.
--
-- ARGV per request: now, the number of resolved limits, each as name and
-- "cp|ra|rp" (compared with the prefix of the limit's field), the number
-- of amounts, each as name and millitokens.

local reqs = {}
for r = 1, #KEYS do
  local q = {key = KEYS[r], now = nxt(), limits = {}, consume = {}}
  for _ = 1, nxtn() do
    q.limits[#q.limits + 1] = {name = nxt(), params = nxt()}
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

-- state returns the balance and total consumed of the limit whose field
-- value is v and whose parameters ("cp|ra|rp") take n characters.
local function state(v, n)
  local rest = string.sub(v, n + 2)
  local bar = string.find(rest, '|', 1, true)
  return string.sub(rest, 1, bar - 1), string.sub(rest, bar + 1)
end

-- params_len returns the length of the parameters of field value v.
local function params_len(v)
  local a = string.find(v, '|', 1, true)
  local b = string.find(v, '|', a + 1, true)
  return string.find(v, '|', b + 1, true) - 1
end

local function refusal(q)
  local flat, at = q.flat, q.at
  if #flat == 0 then return 'bucket_missing' end
  local h = at['h']
  if h and expired(string.match(flat[h], '^[^|]*|[^|]*|[^|]*|([^|]*)|'), q.now) then return 'bucket_expired' end
  for _, l in ipairs(q.limits) do
    local i = at['l:' .. l.name]
    if not i then return 'limit_missing' end
    local v, n = flat[i], #l.params
    if string.sub(v, 1, n) ~= l.params or string.byte(v, n + 1) ~= 124 then return 'limits_changed' end
  end
  local short = false
  for _, c in ipairs(q.consume) do
    local i = at['l:' .. c.name]
    if not i then return 'limit_missing' end
    if c.amount ~= '0' and string.byte(c.amount, 1) ~= 45 then -- positive
      local v = flat[i]
      local tk = state(v, params_len(v))
      if icmp(tk, c.amount) < 0 then short = true end
    end
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
    local set = {}
    for _, c in ipairs(q.consume) do
      if c.amount ~= '0' then
        local f = 'l:' .. c.name
        local i = q.at[f]
        local v = q.flat[i]
        local n = params_len(v)
        local tk, tc = state(v, n)
        v = string.sub(v, 1, n + 1) .. isub(tk, c.amount) .. '|' .. iadd(tc, c.amount)
        q.flat[i] = v
        set[#set + 1] = f
        set[#set + 1] = v
      end
    end
    if #set > 0 then redis.call('HSET', q.key, unpack(set)) end
  end
end
for _, q in ipairs(reqs) do
  out[#out + 1] = table.concat(q.flat, '\n')
end
return out
