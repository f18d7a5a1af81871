-- Speculative consumption: a request takes its amounts (millitokens) from
-- its item without refilling when the item exists, has not expired, stores
-- every resolved limit with exactly the resolved parameters, holds every
-- limit named, and covers every positive amount.
--
-- ARGV per request: now, the number of resolved limits, each as its field
-- ("l:" .. name) and "cp|ra|rp" (compared with the prefix of the field's
-- value), the number of amounts, each as field and millitokens. The arguments are read in
-- place, by index: the common request allocates little.

local find, sub, byte, format = string.find, string.sub, string.byte, string.format

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
-- field f (a limit's field, "l:" .. its name, as the client sends it).
local function field(flat, f)
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
-- take its amounts from item flat (an HGETALL reply); when it can: '', then
-- the first field to write, its value and its index in flat (nil when
-- nothing is written), then the other fields to write (field, value, ...)
-- and their indexes in flat (nil when none). The balance and total move on
-- numbers while they stay exact, else on the exact integers of int.lua.
-- Substrings and patterns are avoided where a plain find will do: every
-- new string is hashed as Redis's Lua creates it.
local function check(argv, flat, now, li, nl, ci, nc)
  local n = #flat
  if n == 0 then return 'bucket_missing' end
  for i = 1, n, 2 do
    if flat[i] == 'h' then
      -- h is rf|sc|cas|ttl|par: the expiry time follows the third separator
      local h = flat[i + 1]
      local a = find(h, '|', 1, true)
      a = a and find(h, '|', a + 1, true)
      a = a and find(h, '|', a + 1, true)
      local b = a and find(h, '|', a + 1, true)
      if a and b ~= a + 1 then
        local ttl = sub(h, a + 1, (b or 0) - 1)
        if ttl ~= '0' then
          -- expired at now (ms) from ttl (s) on; on numbers when exact
          if #ttl <= 12 and #now <= 15 then
            if tonumber(ttl) * 1000 <= tonumber(now) then return 'bucket_expired' end
          elseif expired(ttl, now) then
            return 'bucket_expired'
          end
        end
      end
      break
    end
  end
  -- The first limit's field, parameters, index in flat and the position
  -- of its balance, for its amount.
  local f1, p1, i1, s1
  for k = li + 1, li + 2 * nl, 2 do
    local f = argv[k]
    local i = field(flat, f)
    if not i then return 'limit_missing' end
    local p = argv[k + 1]
    local v = flat[i]
    local m = #p
    -- the value is cp|ra|rp|tk|tc and p is cp|ra|rp
    if byte(v, m + 1) ~= 124 or find(v, p, 1, true) ~= 1 then return 'limits_changed' end
    if not i1 then f1, p1, i1, s1 = f, p, i, m + 1 end
  end
  local short = false
  local wf, wv, wi, set, at
  for k = ci + 1, ci + 2 * nc, 2 do
    local f = argv[k]
    local i, s3, params
    if f == f1 then i, s3, params = i1, s1, p1 else i = field(flat, f) end
    if not i then return 'limit_missing' end
    local amt = argv[k + 1]
    if amt ~= '0' then
      -- the balance and total follow the third separator
      local v = flat[i]
      if not s3 then
        s3 = find(v, '|', find(v, '|', find(v, '|', 1, true) + 1, true) + 1, true)
        params = sub(v, 1, s3 - 1)
      end
      local s4 = find(v, '|', s3 + 1, true)
      local tk, tc = sub(v, s3 + 1, s4 - 1), sub(v, s4 + 1)
      local a, t, c = tonumber(amt), tonumber(tk), tonumber(tc)
      local nt, ntc
      if a and t and c and a < B53 and a > -B53 and t < B53 and t > -B53 and c < B53 and c > -B53 then
        nt, ntc = t - a, c + a
        if nt <= -B53 or nt >= B53 or ntc <= -B53 or ntc >= B53 then nt = nil end
      end
      local nv
      if nt then
        if a > 0 and t < a then short = true end -- a positive amount not covered
        nv = format('%s|%d|%d', params, nt, ntc)
      else
        if byte(amt, 1) ~= 45 and icmp(tk, amt) < 0 then short = true end
        nv = params .. '|' .. isub(tk, amt) .. '|' .. iadd(tc, amt)
      end
      if not wf then
        wf, wv, wi = f, nv, i
      else
        if not set then set, at = {}, {} end
        set[#set + 1] = f
        set[#set + 1] = nv
        at[#at + 1] = i
      end
    end
  end
  if short then return 'app_limit_exhausted' end
  return '', wf, wv, wi, set, at
end

-- take writes the fields check returned to key (one HSET) and into flat.
local function take(key, flat, wf, wv, wi, set, at)
  if not wf then return end
  flat[wi] = wv
  if not set then
    redis.call('HSET', key, wf, wv)
    return
  end
  for j = 1, #at do flat[at[j]] = set[2 * j] end
  redis.call('HSET', key, wf, wv, unpack(set))
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
