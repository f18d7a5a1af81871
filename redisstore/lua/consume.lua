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
--
-- The common request (small numbers, no refusal) allocates little: the
-- arguments are read in place, by index, twice (check, then write).

local find, sub, byte = string.find, string.sub, string.byte

-- field returns the index in flat (an HGETALL reply) of field f's value.
local function field(flat, f)
  for i = 1, #flat, 2 do
    if flat[i] == f then return i + 1 end
  end
end

-- split returns the parameters ("cp|ra|rp"), balance and total consumed
-- of a limit's field value.
local function split(v)
  local a = find(v, '|', 1, true)
  local b = find(v, '|', a + 1, true)
  local c = find(v, '|', b + 1, true)
  local d = find(v, '|', c + 1, true)
  return sub(v, 1, c - 1), sub(v, c + 1, d - 1), sub(v, d + 1)
end

local flats, starts = {}, {}
local out = {0}
local refused = false
local argi = 0
for r = 1, #KEYS do
  local flat = redis.call('HGETALL', KEYS[r])
  flats[r], starts[r] = flat, argi
  local now = ARGV[argi + 1]
  local nl = tonumber(ARGV[argi + 2])
  local li = argi + 2
  local ci = li + 2 * nl + 1
  local nc = tonumber(ARGV[ci])
  argi = ci + 2 * nc
  local why = ''
  if #flat == 0 then
    why = 'bucket_missing'
  else
    local h = field(flat, 'h')
    if h and expired(string.match(flat[h], '^[^|]*|[^|]*|[^|]*|([^|]*)|'), now) then why = 'bucket_expired' end
    if why == '' then
      for k = li + 1, li + 2 * nl, 2 do
        local i = field(flat, 'l:' .. ARGV[k])
        if not i then why = 'limit_missing'; break end
        local p = ARGV[k + 1]
        local v, n = flat[i], #p
        if sub(v, 1, n) ~= p or byte(v, n + 1) ~= 124 then why = 'limits_changed'; break end
      end
    end
    if why == '' then
      local short = false
      for k = ci + 1, ci + 2 * nc, 2 do
        local i = field(flat, 'l:' .. ARGV[k])
        if not i then why = 'limit_missing'; break end
        local amt = ARGV[k + 1]
        if amt ~= '0' and byte(amt, 1) ~= 45 then -- positive
          local _, tk = split(flat[i])
          if icmp(tk, amt) < 0 then short = true end
        end
      end
      if why == '' and short then why = 'app_limit_exhausted' end
    end
  end
  out[r + 1] = why
  if why ~= '' then refused = true end
end

if not refused then
  out[1] = 1
  for r = 1, #KEYS do
    local flat, a = flats[r], starts[r]
    local ci = a + 3 + 2 * tonumber(ARGV[a + 2])
    local set = {}
    for k = ci + 1, ci + 2 * tonumber(ARGV[ci]), 2 do
      local amt = ARGV[k + 1]
      if amt ~= '0' then
        local f = 'l:' .. ARGV[k]
        local i = field(flat, f)
        local p, tk, tc = split(flat[i])
        local v = p .. '|' .. isub(tk, amt) .. '|' .. iadd(tc, amt)
        flat[i] = v
        set[#set + 1] = f
        set[#set + 1] = v
      end
    end
    if #set > 0 then redis.call('HSET', KEYS[r], unpack(set)) end
  end
end
for r = 1, #KEYS do
  out[#out + 1] = table.concat(flats[r], '\n')
end
return out
