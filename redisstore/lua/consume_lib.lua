-- Speculative consumption: a request takes its amounts (millitokens) from
-- its item without refilling when the item exists, has not expired, stores
-- every resolved limit with exactly the resolved parameters, holds every
-- limit named, and covers every positive amount.
--
-- ARGV per request: now, the number of resolved limits, each as name and
-- "cp|ra|rp" (compared with the prefix of the limit's field), the number
-- of amounts, each as name and millitokens. The arguments are read in
-- place, by index: the common request allocates little.

local find, sub, byte, match, format = string.find, string.sub, string.byte, string.match, string.format

-- count and decimal convert the small counts of the arguments and the
-- reply by comparing with constants, not by a parse (strtod) or a format
-- (printf) on every call; as plain functions they cost little to define
-- when the code runs as a script, defined again on every call.
local function count(s)
  if s == '1' then return 1 elseif s == '2' then return 2 elseif s == '0' then return 0 end
  return tonumber(s)
end

local function decimal(n)
  if n == 4 then return '4' elseif n == 6 then return '6' elseif n == 2 then return '2' elseif n == 0 then return '0' end
  return tostring(n)
end

-- field returns the index in flat (an HGETALL reply) of the value of
-- limit name's field ("l:" .. name).
local function field(flat, name)
  local f = 'l:' .. name
  for i = 1, #flat, 2 do
    if flat[i] == f then return i + 1 end
  end
end

-- read_request reads the request whose arguments follow index a of argv
-- (the call's ARGV):
-- it returns its now, the index of its limits' count (li) and that count
-- (nl), the index of its amounts' count (ci) and that count (nc), and the
-- index its arguments end at.
local function read_request(argv, a)
  local nl = count(argv[a + 2])
  local ci = a + 3 + 2 * nl
  local nc = count(argv[ci])
  return argv[a + 1], a + 2, nl, ci, nc, ci + 2 * nc
end

-- check returns why the request read by read_request (from argv) cannot
-- take its amounts from item flat (an HGETALL reply); when it can: '', the
-- fields to write (field, value, ...; nil when none) and the index in flat of each
-- written value. The balance and total move on numbers while they stay
-- exact, else on the exact integers of int.lua.
local function check(argv, flat, now, li, nl, ci, nc)
  local n = #flat
  if n == 0 then return 'bucket_missing' end
  for i = 1, n, 2 do
    if flat[i] == 'h' then
      -- h is rf|sc|cas|ttl|par: the expiry time is its fourth field
      local ttl = match(flat[i + 1], '^[^|]*|[^|]*|[^|]*|([^|]*)')
      if ttl ~= '0' and ttl ~= '' and expired(ttl, now) then return 'bucket_expired' end
      break
    end
  end
  -- The first limit's name, parameters and index in flat, for its amount.
  local name1, p1, i1
  for k = li + 1, li + 2 * nl, 2 do
    local i = field(flat, argv[k])
    if not i then return 'limit_missing' end
    local p = argv[k + 1]
    local v = flat[i]
    local m = #p
    if byte(v, m + 1) ~= 124 or sub(v, 1, m) ~= p then return 'limits_changed' end
    if not i1 then name1, p1, i1 = argv[k], p, i end
  end
  local short = false
  local set, at
  for k = ci + 1, ci + 2 * nc, 2 do
    local name = argv[k]
    local i
    if name == name1 then i = i1 else i = field(flat, name) end
    if not i then return 'limit_missing' end
    local amt = argv[k + 1]
    if amt ~= '0' then
      -- the value is cp|ra|rp|tk|tc: the balance and total follow the
      -- third separator
      local v = flat[i]
      local s3 = find(v, '|', find(v, '|', find(v, '|', 1, true) + 1, true) + 1, true)
      local s4 = find(v, '|', s3 + 1, true)
      local tk, tc = sub(v, s3 + 1, s4 - 1), sub(v, s4 + 1)
      local a, t, c = num(amt), num(tk), num(tc)
      local nt, ntc
      if a and t and c then
        nt, ntc = t - a, c + a
        if nt <= -B53 or nt >= B53 or ntc <= -B53 or ntc >= B53 then nt = nil end
      end
      if not set then set, at = {}, {} end
      set[#set + 1] = flat[i - 1]
      local params = name == name1 and p1 or sub(v, 1, s3 - 1)
      if nt then
        if a > 0 and t < a then short = true end -- a positive amount not covered
        set[#set + 1] = format('%s|%d|%d', params, nt, ntc)
      else
        if byte(amt, 1) ~= 45 and icmp(tk, amt) < 0 then short = true end
        set[#set + 1] = params .. '|' .. isub(tk, amt) .. '|' .. iadd(tc, amt)
      end
      at[#at + 1] = i
    end
  end
  if short then return 'app_limit_exhausted' end
  return '', set, at
end

-- take writes the fields check returned to key (one HSET) and into flat.
local function take(key, flat, set, at)
  if not set then return end
  for j = 1, #at do flat[at[j]] = set[2 * j] end
  redis.call('HSET', key, unpack(set))
end

-- reply appends to out (lines, joined by newlines) the reply of one
-- request: "1" when it was applied, else "0"; the reason it could not take
-- its amounts ('' when it could); the number of lines of its item (0 when
-- missing); then the item's fields and values, one a line.
local function reply(out, applied, why, flat)
  out[#out + 1] = applied and '1' or '0'
  out[#out + 1] = why
  out[#out + 1] = decimal(#flat)
  for i = 1, #flat do out[#out + 1] = flat[i] end
end
